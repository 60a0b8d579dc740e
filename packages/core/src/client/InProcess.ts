/**
 * A `fetch` that answers from an API handler in the same process, without a socket: the
 * controllers, the scheduler and the test cluster use the ordinary typed `Client` over it, so
 * every write they make still passes authentication, authorization, admission and validation,
 * exactly as if it came over HTTPS (kube-apiserver's loopback client does the same).
 */
import { Effect, Stream } from "effect"
import type { ApiRequest, ApiResponse } from "../api/Http.js"
import type { Transport } from "./Client.js"

/** The handler to answer from (`ApiServer.handle`). */
export type Handle = (request: Omit<ApiRequest, "user">) => Effect.Effect<ApiResponse>

const encoder = new TextEncoder()

const bodyBytes = async (init: RequestInit | undefined): Promise<Uint8Array | undefined> => {
  const body = init?.body
  if (body === undefined || body === null) return undefined
  if (typeof body === "string") return encoder.encode(body)
  if (body instanceof Uint8Array) return body
  return new Uint8Array(await new Response(body).arrayBuffer())
}

const headersOf = (init: RequestInit | undefined): Record<string, string> => {
  const out: Record<string, string> = {}
  new Headers(init?.headers).forEach((value, name) => {
    out[name.toLowerCase()] = value
  })
  return out
}

/**
 * A fetch over `handle`. `client` names the caller for in-flight accounting. Aborting the
 * request's signal ends a streamed (watch) response.
 */
export const fetch = (handle: Handle, options: { readonly client?: string } = {}): typeof globalThis.fetch =>
  (async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = new URL(typeof input === "string" ? input : input instanceof URL ? input.href : input.url)
    const request: Omit<ApiRequest, "user"> = {
      method: (init?.method ?? "GET").toUpperCase(),
      path: decodeURIComponent(url.pathname),
      query: url.searchParams,
      headers: headersOf(init),
      body: await bodyBytes(init),
      client: options.client ?? "in-process"
    }
    const response = await Effect.runPromise(handle(request))
    const headers = new Headers(response.headers)
    if (response._tag === "Json") {
      return new Response(typeof response.body === "string" ? response.body : JSON.stringify(response.body), { status: response.status, headers })
    }
    if (response._tag === "Upgrade") {
      const status = { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: "an in-process client cannot upgrade a connection", reason: "BadRequest", code: 400 }
      return new Response(JSON.stringify(status), { status: 400, headers: { "content-type": "application/json" } })
    }
    const signal = init?.signal
    const aborted = Effect.async<void>((resume) => {
      if (!signal) return
      if (signal.aborted) return resume(Effect.void)
      const onAbort = () => resume(Effect.void)
      signal.addEventListener("abort", onAbort, { once: true })
      return Effect.sync(() => signal.removeEventListener("abort", onAbort))
    })
    const body = signal ? Stream.interruptWhen(response.body, aborted) : response.body
    return new Response(Stream.toReadableStream(body), { status: response.status, headers })
  }) as typeof globalThis.fetch

/**
 * A `Client` transport over `handle`: the same requests as `fetch` sends, minus the WHATWG
 * Request, Response and stream objects around them (what the control plane's own clients use).
 */
export const transport =
  (handle: Handle, options: { readonly client?: string } = {}): Transport =>
  (request) =>
    handle({ ...request, client: options.client ?? "in-process" })
