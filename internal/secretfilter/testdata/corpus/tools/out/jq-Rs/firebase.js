"const firebaseConfig = {\n  apiKey: \"AIzacbVZgCQbAIBgolbCDxGGYdySjvkv_Izqkzg\",\n  authDomain: \"acme-prod.firebaseapp.com\",\n};\n"
