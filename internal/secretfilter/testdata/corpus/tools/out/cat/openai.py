from openai import OpenAI

client = OpenAI(api_key="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")
print(client.models.list())
