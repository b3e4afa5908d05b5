"""The OpenAI Responses codec (``ResponsesCodec`` of 0.8.0's ``openai`` entry) on the generic core.

Its public names are re-exported from :mod:`ai_transport.codec` (and the most used from
:mod:`ai_transport`).
"""
