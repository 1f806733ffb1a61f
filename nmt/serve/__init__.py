"""The HTTP server: ``python -m nmt.serve RUN [RUN2 ...]`` (or ``--onnx DIR``).

    app.py       the ASGI app (routes, errors, health) and the command line
    requests.py  the two request shapes, their limits and one-line 4xx errors
    batcher.py   micro-batching of concurrent requests onto decoding threads
    engines.py   a torch Translator or an ONNX model behind one call
    static/      the page at / (no build step, no CDN)
"""
