/**
 * Proxying one plain HTTP request: its route, then its backend's endpoints in order through the
 * undici Agent's keep-alive pools, the response streamed back; a 404, 503, 502 or 504 page when
 * there is no route, no usable backend, or no endpoint answered. Plain Node streams and promises:
 * this is the per-request path.
 */
import { IngressRoutes, ServiceBackends } from "@koder/fleet-core"
import type { IncomingMessage, ServerResponse } from "node:http"
import { pipeline, Readable } from "node:stream"
import type { Agent, Dispatcher } from "undici"
import { describe } from "../DaemonError.js"
import * as IngressPages from "./IngressPages.js"
import * as IngressRequest from "./IngressRequest.js"
import * as IngressUpstreams from "./IngressUpstreams.js"

/** What every forwarded request of one proxy shares. */
export interface Forwarding {
  readonly agent: Agent
  readonly upstreams: IngressUpstreams.Upstreams
  readonly timeouts: IngressUpstreams.Timeouts
  readonly table: () => IngressRoutes.RouteTable
  readonly log: (line: string) => void
}

/** Answer with a page (HTML or text by `Accept`); a response already started is cut instead. */
const answer = (res: ServerResponse, req: IncomingMessage, page: IngressPages.Page, close = false): void => {
  if (res.headersSent) return void res.destroy()
  const { contentType, body } = IngressPages.render(page, req.headers.accept)
  res.writeHead(page.status, { "content-type": contentType, "content-length": Buffer.byteLength(body), "cache-control": "no-store", ...(close ? { connection: "close" } : {}) })
  res.end(req.method === "HEAD" ? undefined : body)
}

/**
 * The request body as a stream that starts reading the client only when undici first asks for
 * data, i.e. once connected: an attempt that never connected leaves the body untouched for the next.
 */
const lazyBody = (req: IncomingMessage) => {
  let started = false
  const stream: Readable = new Readable({
    read() {
      if (!started) {
        started = true
        req.on("data", (chunk: Buffer) => {
          if (!stream.push(chunk)) req.pause()
        })
        req.once("end", () => stream.push(null))
        req.once("error", (e) => stream.destroy(e))
      }
      req.resume()
    }
  })
  return { stream, started: () => started }
}

/** Send the request to the backend's endpoints in turn until one answers; else a 502 or 504 page. */
const forward = async (f: Forwarding, req: IncomingMessage, res: ServerResponse, backend: IngressRoutes.Backend, target: string, secure: boolean) => {
  const { timeouts, upstreams } = f
  const service = IngressRoutes.describeBackend(backend)
  const targets = IngressUpstreams.order(upstreams, backend)
  const withBody = IngressRequest.hasBody(req)
  const headers = IngressRequest.upstreamHeaders(req, secure)
  const abort = new AbortController()
  res.once("close", () => {
    if (!res.writableFinished) abort.abort()
  })
  let code = ""
  for (let i = 0; i < targets.length; i++) {
    const t = targets[i]!
    const body = withBody ? lazyBody(req) : undefined
    let upstream: Dispatcher.ResponseData
    try {
      upstream = await f.agent.request({
        origin: `http://${ServiceBackends.hostPort(t)}`,
        path: target,
        method: req.method as Dispatcher.HttpMethod,
        headers,
        body: body?.stream ?? null,
        signal: abort.signal,
        headersTimeout: timeouts.responseMs,
        bodyTimeout: timeouts.idleMs
      })
    } catch (e) {
      if (abort.signal.aborted) return
      code = IngressUpstreams.codeOf(e)
      if (IngressUpstreams.connectFailures.has(code)) IngressUpstreams.markDown(upstreams, t)
      const untouched = body === undefined || !body.started()
      const again = IngressUpstreams.retryable(code, untouched, withBody, req.method)
      f.log(`${service}: ${ServiceBackends.hostPort(t)}: ${code || describe(e)}${again && i + 1 < targets.length ? ", trying the next endpoint" : ""}`)
      if (!again) break
      continue
    }
    res.writeHead(upstream.statusCode, IngressRequest.downstreamHeaders(upstream.headers))
    pipeline(upstream.body, res, (err) => {
      if (err !== undefined && err !== null) res.destroy()
    })
    return
  }
  const page = IngressUpstreams.timeouts.has(code)
    ? IngressPages.gatewayTimeout(service, Math.round((code === "UND_ERR_CONNECT_TIMEOUT" ? timeouts.connectMs : timeouts.responseMs) / 1000))
    : IngressPages.badGateway(service, targets.length)
  answer(res, req, page, withBody)
}

/** The 'request' listener of one listener (`secure`: the TLS one). */
export const handler = (f: Forwarding, secure: boolean) => (req: IncomingMessage, res: ServerResponse): void => {
  const { match, host, path, target } = IngressRequest.route(f.table(), req)
  if (match === undefined) return answer(res, req, IngressPages.notFound(host, path))
  if (match.backend.problem !== undefined) return answer(res, req, IngressPages.unavailable(match.backend, IngressRoutes.describeBackend))
  forward(f, req, res, match.backend, target, secure).catch((e: unknown) => {
    f.log(`${IngressRoutes.describeBackend(match.backend)}: ${describe(e)}`)
    answer(res, req, IngressPages.badGateway(IngressRoutes.describeBackend(match.backend), 0))
  })
}
