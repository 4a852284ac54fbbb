"""A TLS-terminating TCP proxy for the gateway's https tests.

    python3 tls_proxy.py CERT_PEM KEY_PEM TARGET_PORT

Listens on 127.0.0.1 (a free port, printed on the first line of stdout) and forwards every
connection, decrypted, to 127.0.0.1:TARGET_PORT. Standard library only.
"""

import asyncio
import ssl
import sys


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


async def main(cert, key, target):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    async def handle(client_reader, client_writer):
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(
            pipe(client_reader, upstream_writer),
            pipe(upstream_reader, client_writer),
            return_exceptions=True,
        )

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
