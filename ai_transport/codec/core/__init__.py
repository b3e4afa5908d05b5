"""The codec-agnostic core (sans-I/O): header tiers and field bindings, the stream encoder core and
its asyncio shell, the stream decoder, the decode lifecycle tracker, and the descriptor-table
drivers a table codec is built from (``core/codec`` of ``@ably/ai-transport@0.8.0``).

It knows no codec: :mod:`ai_transport.codec.responses` and :mod:`ai_transport.codec.vercel` build on
it, never the reverse.
"""
