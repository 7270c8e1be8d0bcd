# Generates corpus.json: labelled texts for the secret filter (see README.md). Every credential
# is FAKE, drawn from a seeded PRNG in the real formats; rerun to regenerate the same file:
#   python3 generate.py

import base64, json, os, random, string, uuid
R = random.Random(20260804)
AL = string.ascii_letters + string.digits
def rs(n, al=AL): return ''.join(R.choice(al) for _ in range(n))
B64U = AL + '_-'
B64 = AL + '+/'
UP32 = string.ascii_uppercase + '234567'
HEX = '0123456789abcdef'

def b64body(nbytes, prefix=b''):
    raw = prefix + bytes(R.getrandbits(8) for _ in range(nbytes))
    return base64.b64encode(raw).decode()
def lines(s, w=64): return [s[i:i+w] for i in range(0, len(s), w)]

cases = []
def tp(name, text, want, secrets): cases.append({"name": name, "text": text, "want": want, "secrets": secrets})
def nm(name, text): cases.append({"name": name, "text": text, "want": []})

# anthropic
for i, tmpl in enumerate([
    'ANTHROPIC_API_KEY={k}\nANTHROPIC_BASE_URL=http://llm:8080\n',
    'curl https://api.anthropic.com/v1/messages \\\n  -H "x-api-key: {k}" \\\n  -H "anthropic-version: 2023-06-01" \\\n  -H "content-type: application/json"',
    'import anthropic\n\nclient = anthropic.Anthropic(api_key="{k}")\nmsg = client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, messages=[])\n',
]):
    k = 'sk-ant-api03-' + rs(93, B64U) + 'AA'
    tp(f"anthropic-api-key/{i}", tmpl.format(k=k), ["anthropic-api-key"], [k])
a, r = 'sk-ant-oat01-' + rs(95, B64U), 'sk-ant-ort01-' + rs(95, B64U)
tp("anthropic-api-key/claude-code-oauth", json.dumps({"claudeAiOauth": {"accessToken": a, "refreshToken": r, "expiresAt": 1767225600000, "scopes": ["user:inference"]}}), ["anthropic-api-key", "anthropic-api-key"], [a, r])
for i, tmpl in enumerate([
    'export ANTHROPIC_ADMIN_KEY="{k}"\n',
    '$ curl "https://api.anthropic.com/v1/organizations/users?limit=10" --header "x-api-key: {k}"',
    'admin:\n  key: {k}\n  org: acme\n',
]):
    k = 'sk-ant-admin01-' + rs(93, B64U) + 'AA'
    tp(f"anthropic-admin-key/{i}", tmpl.format(k=k), ["anthropic-admin-key"], [k])
# openai
ks = ['sk-proj-' + rs(74, B64U) + 'T3BlbkFJ' + rs(74, B64U), 'sk-svcacct-' + rs(58, B64U) + 'T3BlbkFJ' + rs(58, B64U), 'sk-' + rs(20) + 'T3BlbkFJ' + rs(20), 'sk-admin-' + rs(58, B64U) + 'T3BlbkFJ' + rs(58, B64U)]
for i, (tmpl, k) in enumerate(zip([
    'OPENAI_API_KEY={k}\n',
    'from openai import OpenAI\nclient = OpenAI(api_key="{k}")\n',
    '>>> openai.api_key = \'{k}\'\n>>> openai.Model.list()',
    '{{"name": "billing-export", "key": "{k}", "created": "2025-01-02"}}',
], ks)):
    tp(f"openai-api-key/{i}", tmpl.format(k=k), ["openai-api-key"], [k])
# aws
for i, pre in enumerate(['AKIA', 'ASIA', 'AKIA']):
    kid, sec = pre + rs(16, UP32), rs(40, B64)
    if i == 0:
        tp("aws/credentials-file", f"[default]\naws_access_key_id = {kid}\naws_secret_access_key = {sec}\nregion = eu-west-1\n", ["aws-access-key-id", "aws-secret-access-key"], [kid, sec])
    elif i == 1:
        tp("aws/sts-json", json.dumps({"Credentials": {"AccessKeyId": kid, "SecretAccessKey": sec, "SessionToken": "IQoJb3JpZ2luX2VjE" + rs(300, B64), "Expiration": "2025-08-04T12:00:00Z"}}, indent=4), ["aws-access-key-id", "aws-secret-access-key"], [kid, sec])
    else:
        tp("aws/env", f"export AWS_ACCESS_KEY_ID={kid}\nexport AWS_SECRET_ACCESS_KEY={sec}\nexport AWS_DEFAULT_REGION=us-east-1\n", ["aws-access-key-id", "aws-secret-access-key"], [kid, sec])
kid = 'AKIA' + rs(16, UP32)
tp("aws-access-key-id/log", f"2025-08-04T10:11:12Z ERROR s3: AccessDenied for principal with key {kid} on bucket acme-backups", ["aws-access-key-id"], [kid])
sec = rs(40, B64)
tp("aws-secret-access-key/python", f"s3 = boto3.client('s3', aws_secret_access_key='{sec}', region_name='eu-central-1')", ["aws-secret-access-key"], [sec])
# github
for i, (tmpl, k) in enumerate([
    ('export GITHUB_TOKEN={k}\ngh repo list acme\n', 'ghp_' + rs(36)),
    ('  github.com:\n    user: octo-bot\n    oauth_token: {k}\n    git_protocol: https\n', 'gho_' + rs(36)),
    ('Installation token for app 123456: {k} (expires in 1h)', 'ghs_' + rs(36)),
    ('GH_PAT: {k}\n', 'github_pat_' + rs(22) + '_' + rs(59)),
]):
    tp(f"github-token/{i}", tmpl.format(k=k), ["github-token"], [k])
# gitlab
for i, tmpl in enumerate([
    'curl --header "PRIVATE-TOKEN: {k}" "https://gitlab.com/api/v4/projects"',
    'GITLAB_TOKEN={k}\n',
    'variables:\n  DEPLOY_TOKEN: "{k}"\n',
]):
    k = 'glpat-' + rs(20, B64U)
    tp(f"gitlab-token/{i}", tmpl.format(k=k), ["gitlab-token"], [k])
k = 'glpat-' + rs(20, B64U)
tp("url-credentials/gitlab-clone", f"git clone https://oauth2:{k}@gitlab.com/acme/infra.git", ["url-credentials"], [k])
# slack
def digits(n): return rs(n, string.digits)
for i, (tmpl, k) in enumerate([
    ('SLACK_BOT_TOKEN=xoxb-{d1}-{d2}-{a}\n', None),
    ('slack = WebClient(token="xoxp-{d1}-{d2}-{d3}-{h}")', None),
    ('{{"ok":true,"access_token":"xoxb-{d1}-{d2}-{a}","scope":"chat:write"}}', None),
]):
    d = dict(d1=digits(12), d2=digits(13), d3=digits(13), a=rs(24), h=rs(32, HEX))
    text = tmpl.format(**d)
    start = text.index('xox'); end = start + 5
    while end < len(text) and (text[end].isalnum() or text[end] == '-'): end += 1
    tp(f"slack-token/{i}", text, ["slack-token"], [text[start:end]])
for i, tmpl in enumerate([
    'SLACK_WEBHOOK_URL=https://hooks.slack.com/services/{p}\n',
    'curl -X POST -H \'Content-type: application/json\' --data \'{{"text":"deploy done"}}\' https://hooks.slack.com/services/{p}',
    'notify:\n  url: "https://hooks.slack.com/workflows/{p}"\n',
]):
    p = 'T' + rs(8, string.ascii_uppercase + string.digits) + '/B' + rs(10, string.ascii_uppercase + string.digits) + '/' + rs(24)
    tp(f"slack-webhook/{i}", tmpl.format(p=p), ["slack-webhook"], [p])
# google
for i, tmpl in enumerate([
    '<script src="https://maps.googleapis.com/maps/api/js?key={k}&callback=initMap"></script>',
    'GOOGLE_API_KEY={k}\n',
    'const firebaseConfig = {{\n  apiKey: "{k}",\n  authDomain: "acme-prod.firebaseapp.com",\n}};',
]):
    k = 'AIza' + rs(35, B64U)
    tp(f"google-api-key/{i}", tmpl.format(k=k), ["google-api-key"], [k])
def pem(kind, nbytes, prefix=b'', headers=None, sep='\n'):
    body = lines(b64body(nbytes, prefix))
    parts = [f'-----BEGIN {kind}-----'] + (headers or []) + body + [f'-----END {kind}-----']
    return sep.join(parts)
for i in range(3):
    key = pem('PRIVATE KEY', 1190, bytes.fromhex('308204bd020100300d06092a864886f70d0101010500048204a7'), sep='\\n') + '\\n'
    sa = {"type": "service_account", "project_id": f"acme-{rs(6, string.ascii_lowercase)}", "private_key_id": rs(40, HEX), "private_key": "@@KEY@@", "client_email": "ci@acme.iam.gserviceaccount.com", "client_id": digits(21), "token_uri": "https://oauth2.googleapis.com/token"}
    text = json.dumps(sa, indent=2 if i != 1 else None).replace('@@KEY@@', key)
    if i == 2: text = 'GOOGLE_CREDENTIALS=\'' + text + '\''
    tp(f"gcp-service-account-key/{i}", text, ["gcp-service-account-key"], [key.split('\\n')[3]])
# stripe
for i, (tmpl, k) in enumerate([
    ('STRIPE_SECRET_KEY={k}\n', 'sk_live_51' + rs(97)),
    ('stripe.api_key = "{k}"\n', 'sk_test_51' + rs(97)),
    ('Restricted key created: {k}', 'rk_live_51' + rs(97)),
]):
    tp(f"stripe-key/{i}", tmpl.format(k=k), ["stripe-key"], [k])
# npm
for i, tmpl in enumerate([
    '//registry.npmjs.org/:_authToken={k}\n',
    'NPM_TOKEN={k}\n',
    '      - run: npm publish\n        env:\n          NODE_AUTH_TOKEN: {k}\n',
]):
    k = 'npm_' + rs(36)
    tp(f"npm-token/{i}", tmpl.format(k=k), ["npm-token"], [k])
# pypi
for i, tmpl in enumerate([
    '[pypi]\n  username = __token__\n  password = {k}\n',
    'twine upload --username __token__ --password {k} dist/*',
    'TWINE_PASSWORD={k}\n',
]):
    k = ('pypi-AgEIcHlwaS5vcmc' if i != 2 else 'pypi-AgENdGVzdC5weXBpLm9yZw') + rs(150, B64U)
    tp(f"pypi-token/{i}", tmpl.format(k=k), ["pypi-token"], [k])
# PEM private keys
variants = [
    ('rsa', 'RSA PRIVATE KEY', 1190, bytes.fromhex('308204a40201000282010100'), None, '\n'),
    ('openssh', 'OPENSSH PRIVATE KEY', 390, b'openssh-key-v1\x00\x00\x00\x00\x04none\x00\x00\x00\x04none', None, '\n'),
    ('ec', 'EC PRIVATE KEY', 118, bytes.fromhex('30770201010420'), None, '\n'),
    ('pkcs8-encrypted', 'ENCRYPTED PRIVATE KEY', 1250, bytes.fromhex('308204e6301c060a2a864886f70d010c0103'), None, '\n'),
    ('rsa-legacy-encrypted', 'RSA PRIVATE KEY', 1190, b'', ['Proc-Type: 4,ENCRYPTED', 'DEK-Info: AES-128-CBC,' + rs(32, '0123456789ABCDEF'), ''], '\n'),
    ('pgp', 'PGP PRIVATE KEY BLOCK', 900, b'', ['Version: GnuPG v2', ''], '\n'),
    ('json-escaped', 'EC PRIVATE KEY', 118, bytes.fromhex('30770201010420'), None, '\\n'),
]
for name, kind, n, prefix, headers, sep in variants:
    block = pem(kind, n, prefix, headers, sep)
    body = block.split(sep)[len(headers or []) + 2]
    text = {'rsa': '$ cat ~/.ssh/id_rsa\n{b}\n$ ', 'openssh': '{b}\n', 'ec': 'tls:\n  key: |\n    ' + '{b}', 'pkcs8-encrypted': '{b}\n', 'rsa-legacy-encrypted': '{b}\n',
            'pgp': 'gpg --export-secret-keys --armor 0xDEADBEEF\n{b}\n', 'json-escaped': '{{"tls_key": "{b}\\n", "tls_cert_file": "/etc/ssl/cert.pem"}}'}[name]
    if name == 'ec':
        block = block.replace('\n', '\n    ')
    tp(f"private-key/{name}", text.format(b=block), ["private-key"], [body])
block = pem('OPENSSH PRIVATE KEY', 390, b'openssh-key-v1\x00')
trunc = '\n'.join(block.split('\n')[:5])
tp("private-key/truncated", f"$ head -5 ~/.ssh/id_ed25519\n{trunc}\n$ echo done\ndone\n", ["private-key"], [trunc.split('\n')[2]])
# jwt
def b64u(b): return base64.urlsafe_b64encode(b).rstrip(b'=').decode()
for i, tmpl in enumerate([
    'Set-Cookie: session={t}; Path=/; HttpOnly; Secure',
    'GET /api/v1/me HTTP/1.1\nHost: app.acme.io\nAuthorization: Bearer {t}\n',
    '{{"id_token": "{t}", "token_type": "Bearer", "expires_in": 3600}}',
]):
    hdr = b64u(json.dumps({"alg": "RS256" if i else "HS256", "typ": "JWT", "kid": rs(8, HEX)}).encode())
    pl = b64u(json.dumps({"sub": digits(10), "email": "dev@acme.io", "iat": 1754300000 + i, "exp": 1754303600 + i}).encode())
    t = hdr + '.' + pl + '.' + b64u(bytes(R.getrandbits(8) for _ in range(256 if i else 32)))
    tp(f"jwt/{i}", tmpl.format(t=t), ["jwt"], [t])
# bearer / basic
for i, (tmpl, k) in enumerate([
    ('curl -H "Authorization: Bearer {k}" https://api.internal.acme.io/v2/deployments', rs(64, HEX)),
    ('2025-08-04 10:22:01 DEBUG request headers: {{"Accept": "application/json", "Authorization": "Bearer {k}"}}', rs(43, B64U)),
    ('requests.get(url, headers={{"Authorization": "token {k}"}})', rs(40, HEX)),
    ('> GET /v1/items HTTP/2\n> authorization: bearer {k}\n> user-agent: curl/8.5.0\n', rs(32) + '.' + rs(27)),
]):
    tp(f"bearer-token/{i}", tmpl.format(k=k), ["bearer-token"], [k])
for i, (tmpl, up) in enumerate([
    ('Authorization: Basic {k}\n', 'deploy:' + rs(16)),
    ('curl -H "Authorization: Basic {k}" https://registry.acme.io/v2/_catalog', 'ci-bot:' + rs(24)),
    ('proxy-authorization: basic {k}', 'alice:' + rs(12)),
]):
    k = base64.b64encode(up.encode()).decode()
    tp(f"basic-auth/{i}", tmpl.format(k=k), ["basic-auth"], [k])
for i, (tmpl, up) in enumerate([
    ('DATABASE_URL=postgres://app:{p}@db.prod.internal:5432/orders?sslmode=require\n', rs(24)),
    ('mongo "mongodb+srv://admin:{p}@cluster0.x1y2z.mongodb.net/test"', rs(16)),
    ('REDIS_URL=redis://:{p}@cache.acme.internal:6379/0\n', rs(32)),
    ('[remote "origin"]\n\turl = https://deploy:{p}@git.acme.internal/platform/api.git\n', rs(20)),
]):
    tp(f"url-credentials/{i}", tmpl.format(p=up), ["url-credentials"], [up])

# near misses
nm("placeholder/anthropic-short", "Set ANTHROPIC_API_KEY=sk-ant-xxxx in your shell, then run the CLI.")
nm("placeholder/anthropic-x", "ANTHROPIC_API_KEY=sk-ant-api03-" + "X" * 93 + "AA")
nm("placeholder/anthropic-dots", 'client = Anthropic(api_key="sk-ant-api03-...")  # your key here')
nm("placeholder/openai", "OPENAI_API_KEY=sk-proj-your-key-here\nOPENAI_ORG=org-acme")
nm("uuid", "request_id=550e8400-e29b-41d4-a716-446655440000 trace=6ba7b810-9dad-11d1-80b4-00c04fd430c8 " + " ".join(str(uuid.UUID(int=R.getrandbits(128), version=4)) for _ in range(4)))
nm("git-sha", "commit " + rs(40, HEX) + "\nMerge: " + rs(7, HEX) + " " + rs(7, HEX) + "\nAuthor: Dev <dev@acme.io>\n\n    aws: bump sdk to " + rs(40, HEX) + "\n")
nm("git-sha-aws-var", "AWS_SDK_COMMIT=" + rs(40, HEX) + "\naws_region = eu-west-1\n")
nm("base64-text", "payload: " + base64.b64encode(b"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.").decode())
nm("code-identifiers", 'func (d *Detector) DetectBytes(content []byte) []Finding {\n\tif strings.HasPrefix(key, "AKIA") || strings.HasPrefix(key, "sk-ant-") {\n\t\treturn nil\n\t}\n\tnpmConfigRegistry := os.Getenv("npm_config_registry")\n\tghpPrefix := "ghp_"\n}\n')
nm("npm-env", "npm_lifecycle_event=test npm_package_version=1.2.3 npm_config_cache=/home/dev/.npm")
nm("lorem", "Lorem ipsum dolor sit amet, consectetur adipiscing elit. Sed bearer of news, the authorization of the council was token at best. Asia and Europe met; secret access keys were discussed.")
nm("aws-example-keys", "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n")
nm("bearer-variables", 'curl -H "Authorization: Bearer $TOKEN" https://api.acme.io\nheaders = {"Authorization": f"Bearer {api_key}"}\n# Authorization: Bearer <token>\nAuthorization: Bearer YOUR_ACCESS_TOKEN\n')
nm("pem-public", "-----BEGIN PUBLIC KEY-----\n" + "\n".join(lines(b64body(270))) + "\n-----END PUBLIC KEY-----\n-----BEGIN CERTIFICATE-----\n" + "\n".join(lines(b64body(700))) + "\n-----END CERTIFICATE-----\n")
nm("pem-header-in-code", 'const rsaHeader = "-----BEGIN RSA PRIVATE KEY-----"\nif bytes.HasPrefix(data, []byte("-----BEGIN PRIVATE KEY-----\\n")) {\n')
nm("pem-placeholder", "-----BEGIN PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----")
nm("urls-without-password", "https://github.com/acme/infra\ngit@github.com:acme/infra.git\nhttps://bot@git.acme.internal/x.git\nhttp://localhost:8080/health?x=1\n")
nm("url-password-template", "postgres://app:${DB_PASSWORD}@db:5432/app\nmysql://root:****@127.0.0.1/test\nredis://user:<password>@cache:6379\n")
nm("url-example-host", "https://user:password@example.com/path and ftp://anonymous:guest@ftp.example.org/")
nm("digests", "image: registry.acme.io/api@sha256:" + rs(64, HEX) + "\n\"integrity\": \"sha512-" + b64body(64) + "\"\ngolang.org/x/net v0.62.0 h1:" + b64body(32) + "\n")
nm("slack-example-webhook", "SLACK_WEBHOOK=https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX")
nm("slack-placeholder", "token: xoxb-your-token-here")
nm("jwt-header-only", "the header eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9 decodes to alg HS256")
nm("stripe-publishable", "STRIPE_PUBLISHABLE_KEY=pk_live_51" + rs(97))
nm("google-oauth-client-id", "client_id: " + digits(12) + "-" + rs(32, string.ascii_lowercase + string.digits) + ".apps.googleusercontent.com")
nm("hex-test-vector", "var want = \"" + rs(64, HEX) + "\" // sha256 of the fixture")
nm("github-placeholder", "export GITHUB_TOKEN=ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX")
nm("aws-placeholder", "aws_access_key_id = AKIAXXXXXXXXXXXXXXXX\naws_secret_access_key = <your secret key>")
nm("basic-placeholder", "Authorization: Basic <base64(user:pass)>")
nm("go-source", 'package main\n\nimport "fmt"\n\n// tokenize splits the bearer header into fields.\nfunc tokenize(authorization string) []string {\n\tfields := strings.Fields(authorization)\n\treturn fields\n}\n')

# base64-encoded credentials (Kubernetes secrets, Docker auth, shell)
def core(plain, secret, urlsafe=False):
    off = plain.index(secret)
    enc = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(plain.encode()).decode()
    return enc[(8*off+5)//6 : 8*(off+len(secret))//6]
gh, npm = 'ghp_' + rs(36), 'npm_' + rs(36)
y = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: ci-tokens\ntype: Opaque\ndata:\n  GITHUB_TOKEN: %s\n  NPM_TOKEN: %s\n" % (base64.b64encode(gh.encode()).decode(), base64.b64encode(npm.encode()).decode())
tp("encoded/k8s-secret", y, ["github-token", "npm-token"], [core(gh, gh), core(npm, npm)])
k = 'sk-ant-api03-' + rs(93, B64U) + 'AA'
tp("encoded/echo-base64", "echo %s | base64 -d > ~/.config/anthropic/key" % base64.b64encode(k.encode()).decode(), ["anthropic-api-key"], [core(k, k)])
kid, sec = 'AKIA' + rs(16, UP32), rs(40, B64)
plain = "[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n" % (kid, sec)
tp("encoded/aws-credentials-file", "credentials: " + base64.b64encode(plain.encode()).decode(), ["aws-access-key-id", "aws-secret-access-key"], [core(plain, kid), core(plain, sec)])
gh = 'ghp_' + rs(36)
plain = 'octo-bot:' + gh
tp("encoded/docker-config", json.dumps({"auths": {"ghcr.io": {"auth": base64.b64encode(plain.encode()).decode()}}}), ["github-token"], [core(plain, gh)])
sk = 'sk_live_51' + rs(97)
plain = json.dumps({"return_to": "/billing", "stripe": sk})
tp("encoded/url-state", "https://app.acme.io/oauth/callback?code=4/0Ad" + rs(20) + "&state=" + base64.urlsafe_b64encode(plain.encode()).decode().rstrip('='), ["stripe-key"], [core(plain, sk, True)])
nm("encoded/placeholder", "data:\n  ANTHROPIC_API_KEY: " + base64.b64encode(b"sk-ant-xxxxxxxxxxxxxxxxxxxxxxxx").decode() + "\n  LOG_LEVEL: ZGVidWc=\n")

json.dump(cases, open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus.json'), 'w'), indent=1)
print(len(cases), sum(1 for c in cases if c['want']))
