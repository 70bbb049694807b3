// Aedes (npm), an MQTT 3.1.1 broker for Node.js, as the interop matrix runs it (host_bridge/broker/peers.py):
// on 127.0.0.1 and the port given, in memory, until SIGTERM. Its package comes from the folder given second
// (build/brokers/aedes, where `make broker-peers` installs it).
import net from 'node:net'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

const port = Number(process.argv[2])
const { Aedes } = await import(pathToFileURL(join(process.argv[3], 'node_modules', 'aedes', 'aedes.js')).href)
const broker = await Aedes.createBroker()
const server = net.createServer(broker.handle)
server.listen(port, '127.0.0.1', () => console.log(`aedes listening on 127.0.0.1:${port}`))
process.on('SIGTERM', () => {
  server.close()
  broker.close(() => process.exit(0))
})
