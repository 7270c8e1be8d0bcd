Traceback (most recent call last):
  File "<string>", line 5, in <module>
  File "<string>", line 4, in connect
ConnectionError: could not authenticate with 'const firebaseConfig = {\n  apiKey: "AIzacbVZgCQbAIBgolbCDxGGYdySjvkv_Izqkzg",\n  authDomain: "acme-prod.firebaseapp.com",\n};\n'
