/**
 * A minimal `node:http` front for core's API handler, through `InProcess.fetch` (core's
 * WHATWG-fetch view of the handler): read the body (bounded), pass method, path, headers and an
 * abort signal, and copy the answer back — streaming it, so watches work. The daemon's HTTPS
 * server adds TLS, per-client limits, timeouts and graceful draining; a service embedding Fleet
 * behind its own gateway may need no more than this.
 */
import { InProcess } from "@koder/fleet-core"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"

const maxBodyBytes = 3 * 1024 * 1024

/** Serve `handle` on `host:port` (0: any free port); resolves once listening. */
export const listen = (handle: InProcess.Handle, host: string, port: number): Promise<{ readonly server: Server; readonly url: string }> => {
  const server = createServer(async (req, res) => {
    const aborted = new AbortController()
    res.on("close", () => aborted.abort())
    try {
      const chunks: Array<Buffer> = []
      let size = 0
      for await (const chunk of req as AsyncIterable<Buffer>) {
        size += chunk.length
        if (size > maxBodyBytes) {
          res.writeHead(413).end()
          return
        }
        chunks.push(chunk)
      }
      const headers: Record<string, string> = {}
      for (const [name, value] of Object.entries(req.headers)) if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value
      // The remote address names the client for the handler's in-flight accounting.
      const api = InProcess.fetch(handle, { client: req.socket.remoteAddress ?? "unknown" })
      const response = await api(`http://${host}${req.url ?? "/"}`, {
        method: req.method ?? "GET",
        headers,
        ...(chunks.length === 0 ? {} : { body: Buffer.concat(chunks) }),
        signal: aborted.signal
      })
      res.writeHead(response.status, Object.fromEntries(response.headers))
      res.flushHeaders()
      if (response.body !== null) for await (const chunk of response.body) res.write(chunk)
      res.end()
    } catch {
      // The client went away mid-stream (or the handler was interrupted at shutdown).
      res.destroy()
    }
  })
  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(port, host, () => {
      const address = server.address() as AddressInfo
      resolve({ server, url: `http://${address.family === "IPv6" ? `[${address.address}]` : address.address}:${address.port}` })
    })
  })
}
