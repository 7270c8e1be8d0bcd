Traceback (most recent call last):
  File "<string>", line 5, in <module>
  File "<string>", line 4, in connect
ConnectionError: could not authenticate with 'from openai import OpenAI\n\nclient = OpenAI(api_key="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")\nprint(client.models.list())\n'
