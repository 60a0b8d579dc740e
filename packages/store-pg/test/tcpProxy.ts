// A TCP proxy in front of PostgreSQL, so a test can make the server unreachable (and reachable
// again) without touching the server that other people's tests share.
import * as net from "node:net"

/** A running proxy. */
export interface TcpProxy {
  readonly port: number
  /** Drop every connection and refuse new ones, as a stopped server would. */
  readonly cut: () => Promise<void>
  /** Accept connections again on the same port. */
  readonly restore: () => Promise<void>
  readonly close: () => Promise<void>
}

/** Start a proxy on a free local port that forwards to `host:port`. */
export const start = async (target: { readonly host: string; readonly port: number }): Promise<TcpProxy> => {
  const sockets = new Set<net.Socket>()
  const serve = () =>
    net.createServer((client) => {
      const upstream = net.connect(target.port, target.host)
      for (const s of [client, upstream]) {
        sockets.add(s)
        s.on("error", () => {})
        s.on("close", () => {
          sockets.delete(s)
          client.destroy()
          upstream.destroy()
        })
      }
      client.pipe(upstream)
      upstream.pipe(client)
    })
  const listen = (server: net.Server, port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once("error", reject)
      server.listen(port, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port))
    })
  let server: net.Server | undefined = serve()
  const port = await listen(server, 0)
  const stop = async () => {
    const s = server
    server = undefined
    for (const socket of sockets) socket.destroy()
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()))
  }
  return {
    port,
    cut: stop,
    restore: async () => {
      if (server) return
      server = serve()
      await listen(server, port)
    },
    close: stop
  }
}
