/** Writing a JSON response (most of them a Status) to the wire in one piece. */
import { Http, type Status } from "@koder/fleet-core"
import type { ServerResponse } from "node:http"

/** Write `response` with its length; `close` asks the client to drop the connection after it. */
export const send = (res: ServerResponse, response: Http.JsonResponse, close = false): void => {
  if (res.headersSent || res.destroyed) return
  const body = typeof response.body === "string" ? response.body : JSON.stringify(response.body)
  const headers: Record<string, string | number> = { ...response.headers, "content-length": Buffer.byteLength(body) }
  if (close) headers["connection"] = "close"
  res.writeHead(response.status, headers)
  res.end(body)
}

/** A Status as a JSON response with its own code (500 without one). */
export const ofStatus = (status: Status.Status, headers: Record<string, string> = {}): Http.JsonResponse => Http.json(status.code ?? 500, status, headers)
