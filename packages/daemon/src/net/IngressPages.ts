/**
 * The ingress proxy's own answers — 404 (no rule), 502 (the endpoints failed), 503 (the Service
 * has no ready endpoints, or does not exist), 504 (an endpoint did not answer in time) — as HTML
 * for browsers and plain text for everything else (curl, scripts). Each names the Service it
 * meant to reach, so "why is my site down" is answered by the page itself; endpoint addresses stay
 * in the proxy's log.
 */
import type { IngressRoutes } from "@koder/fleet-core"

/** An answer of the proxy itself. */
export interface Page {
  readonly status: number
  readonly title: string
  readonly detail: string
}

/** No rule (and no default backend) matched the request. */
export const notFound = (host: string, path: string): Page => ({
  status: 404,
  title: "Not Found",
  detail: `No Ingress rule matches host ${JSON.stringify(host)} and path ${JSON.stringify(path)}.`
})

const why: Record<IngressRoutes.Problem, (service: string) => string> = {
  ServiceNotFound: (s) => `Service ${s} does not exist.`,
  PortNotFound: (s) => `Service ${s} has no such port.`,
  NoReadyEndpoints: (s) => `Service ${s} has no ready endpoints.`,
  UnsupportedBackend: (s) => `The backend ${s} is not a Service; the Fleet ingress serves Service backends only.`
}

/** The matched backend cannot take requests. */
export const unavailable = (backend: IngressRoutes.Backend, describe: (b: IngressRoutes.Backend) => string): Page => ({
  status: 503,
  title: "Service Unavailable",
  detail: why[backend.problem ?? "NoReadyEndpoints"](describe(backend))
})

/** Every endpoint tried failed before answering. */
export const badGateway = (service: string, tried: number): Page => ({
  status: 502,
  title: "Bad Gateway",
  detail: `No endpoint of Service ${service} could be reached (${tried} tried).`
})

/** The endpoint did not answer within the proxy's timeout. */
export const gatewayTimeout = (service: string, seconds: number): Page => ({
  status: 504,
  title: "Gateway Timeout",
  detail: `Service ${service} did not answer within ${seconds} s.`
})

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/** The body and content type of a page, HTML when the client prefers it. */
export const render = (page: Page, accept: string | undefined): { readonly contentType: string; readonly body: string } =>
  (accept ?? "").includes("text/html")
    ? {
        contentType: "text/html; charset=utf-8",
        body:
          `<!doctype html>\n<html><head><meta charset="utf-8"><title>${page.status} ${escape(page.title)}</title></head>\n` +
          `<body><h1>${page.status} ${escape(page.title)}</h1>\n<p>${escape(page.detail)}</p>\n<hr><p>Koder Fleet ingress</p></body></html>\n`
      }
    : { contentType: "text/plain; charset=utf-8", body: `${page.status} ${page.title}: ${page.detail}\n` }

/** The page as a raw HTTP/1.1 response, for a connection that asked to upgrade. */
export const raw = (page: Page): string => {
  const { contentType, body } = render(page, undefined)
  return `HTTP/1.1 ${page.status} ${page.title}\r\ncontent-type: ${contentType}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
}
