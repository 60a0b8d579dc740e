/**
 * core's HostPortAllocator port on the host: a free port is one the kernel hands out for a
 * listener on port 0 (TCP, or UDP for UDP ports; SCTP is treated as TCP). A port handed out is
 * not handed out again for a minute, so two pods starting at once never get the same port before
 * either listens; the agent also excludes the ports its pods hold.
 */
import { AgentError, HostPortAllocator } from "@koder/fleet-core"
import { Effect, Layer } from "effect"
import { createSocket } from "node:dgram"
import { createServer } from "node:net"

const quarantineMs = 60_000

const freeTcp = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

const freeUdp = () =>
  new Promise<number>((resolve, reject) => {
    const socket = createSocket("udp4")
    socket.once("error", reject)
    socket.bind(0, () => {
      const port = socket.address().port
      socket.close(() => resolve(port))
    })
  })

/** The allocator. */
export const make = (): HostPortAllocator.HostPortAllocatorService => {
  const recent = new Map<number, number>()
  return {
    allocate: (protocols, exclude) =>
      Effect.tryPromise({
        try: async () => {
          const now = Date.now()
          for (const [port, at] of recent) if (now - at > quarantineMs) recent.delete(port)
          const out: Array<number> = []
          for (const protocol of protocols) {
            for (let attempt = 0; ; attempt++) {
              if (attempt > 100) throw new Error("no free port after 100 tries")
              const port = protocol === "UDP" ? await freeUdp() : await freeTcp()
              if (port === 0 || exclude.has(port) || recent.has(port) || out.includes(port)) continue
              out.push(port)
              recent.set(port, now)
              break
            }
          }
          return out
        },
        catch: (e) => new AgentError.HostPortError({ message: e instanceof Error ? e.message : String(e) })
      })
  }
}

/** The HostPortAllocator port on this host. */
export const layer: Layer.Layer<HostPortAllocator.HostPortAllocator> = Layer.sync(HostPortAllocator.HostPortAllocator, make)
