"""The APIs teams already call, answered from the same knowledge bases: OpenAI's vector
stores and files (openai.py, files.py) and Amazon Bedrock's Retrieve (bedrock.py). Each
maps its API's request onto the product's typed records and its answer back; the routes
are in chalicelib/api/openai_compat.py and chalicelib/api/bedrock_compat.py."""
