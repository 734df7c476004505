"""The local OpenAI-compatible server: `llambda serve`.

`owner` runs the engine on its own thread (one owner, FIFO queue); `openai_wire` checks requests
and builds responses in the OpenAI wire format; `app` is the HTTP side (Starlette on uvicorn)
with its guards; `cli` is the command.
"""
