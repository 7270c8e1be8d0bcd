diff --git a/src/firebase.js b/src/firebase.js
new file mode 100644
index 0000000..d48feea
--- /dev/null
+++ b/src/firebase.js
@@ -0,0 +1,4 @@
+const firebaseConfig = {
+  apiKey: "AIzacbVZgCQbAIBgolbCDxGGYdySjvkv_Izqkzg",
+  authDomain: "acme-prod.firebaseapp.com",
+};
