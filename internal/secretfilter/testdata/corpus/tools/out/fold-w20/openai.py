from openai import O
penAI

client = OpenAI(api_
key="sk-proj-DgD5Rr_
vZVylwB5f8FgmWrzj-bA
TGP5XyfjwTVjVjuUTbBa
hF_c0xrcoeZRE5lyOpru
-gCadfJT3BlbkFJig00p
pBOnKBZKeVxfWid7_cVB
RJ55vYpRkN74J1DiQbzM
D3-eFm7D4Cu7WDolijd5
cgcr-a10G")
print(client.models.
list())
