const firebaseConfig
 = {
  apiKey: "AIzacbVZg
CQbAIBgolbCDxGGYdySj
vkv_Izqkzg",
  authDomain: "acme-
prod.firebaseapp.com
",
};
