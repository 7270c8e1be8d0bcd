const firebaseConfig = {  apiKey: "AIzacbVZgCQbAIBgolbCDxGGYdySjvkv_Izqkzg",  authDomain: "acme-prod.firebaseapp.com",};
