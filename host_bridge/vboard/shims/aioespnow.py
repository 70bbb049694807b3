# aioespnow module shim for the virtual board: the ESP32 port's asyncio face of ESP-NOW (frozen there, over the
# espnow module): AIOESPNow is an ESPNow whose arecv(), airecv() and asend() wait in asyncio's I/O queue, which
# polls the object (its ioctl says when a frame is waiting), and which `async for` reads.
import asyncio

import espnow


class AIOESPNow(espnow.ESPNow):
    async def arecv(self):
        yield asyncio.core._io_queue.queue_read(self)
        return self.recv(0)

    async def airecv(self):
        yield asyncio.core._io_queue.queue_read(self)
        return self.irecv(0)

    async def asend(self, mac, msg=None, sync=None):
        if msg is None:
            msg, mac = mac, None
        if sync is None:
            sync = True
        yield asyncio.core._io_queue.queue_write(self)
        return self.send(mac, msg, sync)

    def __aiter__(self):
        return self

    async def __anext__(self):
        return await self.airecv()
