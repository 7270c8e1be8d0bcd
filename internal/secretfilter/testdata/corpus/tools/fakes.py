#!/usr/bin/env python3
# Writes src/: files holding FAKE secrets in the real formats (checksums where the format has
# one), and files that hold none, for capture.sh to run the real tools over; and secrets.json,
# what each source holds (rule, value). Tokens come from a seeded PRNG, so a rerun writes the
# same tokens; the private keys come from openssl and ssh-keygen, fresh each run, never used.
# None of these was ever issued by a provider. Run from this folder: python3 fakes.py
import base64, binascii, hashlib, hmac, json, os, random, string, subprocess, tempfile

R = random.Random(2108)
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, 'src')
B62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
ALNUM = string.ascii_letters + string.digits
B64U = ALNUM + '-_'
B64 = ALNUM + '+/'
def rs(n, al=ALNUM): return ''.join(R.choice(al) for _ in range(n))

def base62(n, width):
    out = ''
    while n:
        n, d = divmod(n, 62)
        out = B62[d] + out
    return out.rjust(width, '0')

def crc_token(prefix):
    # GitHub's and npm's tokens: 30 random characters, then the CRC32 of them in base62 (6).
    body = rs(30)
    return prefix + body + base62(binascii.crc32(body.encode()), 6)

def aws_key_id(account):
    # AKIA, then base32 of 10 bytes whose first 6 hold the account id shifted left by 7 bits
    # (the layout AWS key ids have had since 2019) and random bits after.
    raw = ((account << 7) | R.getrandbits(7)).to_bytes(6, 'big') + bytes(R.getrandbits(8) for _ in range(4))
    return 'AKIA' + base64.b32encode(raw).decode()[:16]

def b64u(b): return base64.urlsafe_b64encode(b).rstrip(b'=').decode()

def jwt():
    hdr = b64u(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(',', ':')).encode())
    pl = b64u(json.dumps({"sub": "1029384756", "name": "Dev Eloper", "iat": 1754300000, "exp": 1754303600}, separators=(',', ':')).encode())
    sig = b64u(hmac.new(b'fake-signing-key-' + rs(16).encode(), f'{hdr}.{pl}'.encode(), hashlib.sha256).digest())
    return f'{hdr}.{pl}.{sig}'

def run(*cmd, **kw): return subprocess.run(cmd, check=True, capture_output=True, **kw).stdout

def pem_keys():
    with tempfile.TemporaryDirectory() as d:
        rsa = run('openssl', 'genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048').decode()
        ec = run('openssl', 'ecparam', '-name', 'prime256v1', '-genkey', '-noout').decode()
        run('ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C', 'dev@laptop', '-f', os.path.join(d, 'k'))
        ssh = open(os.path.join(d, 'k')).read()
        pub = run('openssl', 'pkey', '-pubout', input=rsa.encode()).decode()
    return rsa, ec, ssh, pub

def body_line(pem): return [l for l in pem.splitlines() if l and not l.startswith('-----')][1]

sources, secrets = {}, {}
def src(name, text, *pairs):
    sources[name] = text
    secrets[name] = [{"rule": r, "value": v} for r, v in pairs]

kid, sec = aws_key_id(R.randrange(10**11, 10**12)), rs(40, B64)
src('aws-credentials.ini', f'[default]\naws_access_key_id = {kid}\naws_secret_access_key = {sec}\nregion = eu-west-1\noutput = json\n',
    ('aws-access-key-id', kid), ('aws-secret-access-key', sec))
kid2, sec2 = aws_key_id(R.randrange(10**11, 10**12)), rs(40, B64)
src('aws.env', f'AWS_ACCESS_KEY_ID={kid2}\nAWS_SECRET_ACCESS_KEY={sec2}\nAWS_DEFAULT_REGION=us-east-1\n',
    ('aws-access-key-id', kid2), ('aws-secret-access-key', sec2))
gh = crc_token('ghp_')
src('github.env', f'# CI token for the release job\nGITHUB_TOKEN={gh}\nGH_REPO=acme/infra\n', ('github-token', gh))
pat = 'github_pat_' + rs(22) + '_' + rs(59)
src('github-hosts.yml', f'github.com:\n    user: octo-bot\n    oauth_token: {pat}\n    git_protocol: https\n', ('github-token', pat))
ant = 'sk-ant-api03-' + rs(93, B64U) + 'AA'
src('anthropic.env', f'ANTHROPIC_API_KEY={ant}\nANTHROPIC_BASE_URL=http://llm:8080\n', ('anthropic-api-key', ant))
oai = 'sk-proj-' + rs(74, B64U) + 'T3BlbkFJ' + rs(74, B64U)
src('openai.py', f'from openai import OpenAI\n\nclient = OpenAI(api_key="{oai}")\nprint(client.models.list())\n', ('openai-api-key', oai))
xoxb = f'xoxb-{rs(12, string.digits)}-{rs(13, string.digits)}-{rs(24)}'
src('slack.json', json.dumps({"ok": True, "access_token": xoxb, "token_type": "bot", "scope": "chat:write,channels:read", "team": {"id": "T" + rs(10, string.ascii_uppercase + string.digits)}}, indent=2) + '\n', ('slack-token', xoxb))
hook = 'T' + rs(10, string.ascii_uppercase + string.digits) + '/B' + rs(10, string.ascii_uppercase + string.digits) + '/' + rs(24)
src('slack-webhook.yml', f'notify:\n  on_failure: true\n  url: https://hooks.slack.com/services/{hook}\n', ('slack-webhook', hook))
sk = 'sk_live_51' + rs(97)
src('stripe.env', f'STRIPE_SECRET_KEY={sk}\nSTRIPE_WEBHOOK_PATH=/hooks/stripe\n', ('stripe-key', sk))
npm = crc_token('npm_')
src('npmrc', f'registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken={npm}\n', ('npm-token', npm))
gl = 'glpat-' + rs(20, B64U)
src('gitlab-ci.yml', f'variables:\n  DEPLOY_TOKEN: "{gl}"\n  IMAGE: registry.gitlab.com/acme/api\n', ('gitlab-token', gl))
gk = 'AIza' + rs(35, B64U)
src('firebase.js', f'const firebaseConfig = {{\n  apiKey: "{gk}",\n  authDomain: "acme-prod.firebaseapp.com",\n}};\n', ('google-api-key', gk))
pw = rs(24)
src('database.env', f'DATABASE_URL=postgres://app:{pw}@db.prod.internal:5432/orders?sslmode=require\n', ('url-credentials', 'app:' + pw))
tok = jwt()
src('request.http', f'GET /api/v1/me HTTP/1.1\nHost: app.acme.io\nAuthorization: Bearer {tok}\nAccept: application/json\n', ('jwt', tok))
rsa, ec, ssh, pub = pem_keys()
src('id_rsa.pem', rsa, ('private-key', body_line(rsa)))
src('ec.pem', ec, ('private-key', body_line(ec)))
src('id_ed25519', ssh, ('private-key', body_line(ssh)))
# Sources that hold no secret: each format of them must give no hit.
src('none-aws-example.ini', '[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n')
src('none-placeholders.env', 'ANTHROPIC_API_KEY=sk-ant-xxxx\nGITHUB_TOKEN=ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX\nOPENAI_API_KEY=sk-proj-your-key-here\nAuthorization: Bearer $TOKEN\nDATABASE_URL=postgres://app:${DB_PASSWORD}@db:5432/app\n')
src('none-public.pem', pub)
src('none-gosum.txt', ''.join(f'github.com/{rs(6).lower()}/{rs(5).lower()} v1.{R.randrange(20)}.{R.randrange(20)} h1:{base64.b64encode(bytes(R.getrandbits(8) for _ in range(32))).decode()}\n' for _ in range(6)))
src('none-gitlog.txt', ''.join(f'commit {rs(40, "0123456789abcdef")}\nAuthor: Dev <dev@acme.io>\n\n    aws: bump sdk to {rs(40, "0123456789abcdef")}\n\n' for _ in range(3)))
src('none-main.go.txt', 'package main\n\nimport (\n\t"fmt"\n\t"os"\n)\n\n// tokenize splits the bearer header into fields.\nfunc tokenize(authorization string) []string {\n\tkey := os.Getenv("ANTHROPIC_API_KEY")\n\tif key == "" {\n\t\treturn nil\n\t}\n\treturn []string{fmt.Sprintf("%s-%d", authorization, len(key))}\n}\n')
src('none-uuids.txt', '\n'.join(f'request_id={R.getrandbits(128):032x} trace=550e8400-e29b-41d4-a716-446655440000' for _ in range(4)) + '\n')

os.makedirs(SRC, exist_ok=True)
for name, text in sources.items():
    open(os.path.join(SRC, name), 'w').write(text)
json.dump(secrets, open(os.path.join(HERE, 'secrets.json'), 'w'), indent=1)
print(len(sources), 'sources')
