/**
 * A Pull member's end of its tunnel to the hub (core MemberTunnel): dialled out with the member's
 * certificate, so it works from behind NAT, and kept open — pinged every `pingMs`, torn down when
 * two pings go unanswered (a cut link), and dialled again with a growing pause (1 s to 30 s).
 * The hub's requests are answered by the member's own API in this process, as the user the hub
 * impersonates: the tunnel's own identity is the control plane's, which may impersonate, and a
 * request without an impersonated user is refused (MemberTunnel.serve).
 */
import { type InProcess, type MemberConnections, MemberTunnel } from "@koder/fleet-core"
import { Effect, Stream, type Scope } from "effect"
import WebSocket from "ws"
import { messageSocket } from "../internal/WebSocketUpgrade.js"

/** How the link is set up. */
export interface Options {
  /** The hub's URL (`https://…`). */
  readonly hub: string
  readonly member: string
  readonly ca: string
  /** The member's current certificate and key (they change on renewal). */
  readonly identity: () => { readonly cert: string; readonly key: string }
  /** The member's own token, sent beside the certificate (none for a member joined without one). */
  readonly token?: string
  readonly answer: (request: MemberConnections.ProxyRequest) => Promise<MemberConnections.ProxyResponse>
  readonly pingMs?: number
  readonly onState?: (state: "open" | "closed", why?: string) => void
}

const encoder = new TextEncoder()

/** The member's API answering a tunnelled request in-process, as the control plane (which impersonates). */
export const localAnswer =
  (handle: InProcess.Handle, token: string, options: { readonly maxBytes?: number; readonly timeoutMs?: number } = {}) =>
  async (r: MemberConnections.ProxyRequest): Promise<MemberConnections.ProxyResponse> => {
    const url = new URL(r.path, "https://member.fleet.internal")
    // The hub's own credentials never reach the member's API: this process's identity does.
    const headers: Record<string, string> = { ...r.headers, authorization: `Bearer ${token}` }
    const response = await Effect.runPromise(
      handle({ method: r.method, path: decodeURIComponent(url.pathname), query: url.searchParams, headers, body: r.body, client: "fleet-hub-tunnel" })
    )
    if (response._tag === "Json") return { status: response.status, headers: response.headers, body: encoder.encode(typeof response.body === "string" ? response.body : JSON.stringify(response.body)) }
    if (response._tag === "Upgrade") return { status: 400, headers: { "content-type": "application/json" }, body: encoder.encode(JSON.stringify({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: "streams are not tunnelled", code: 400 })) }
    const max = options.maxBytes ?? 64 * 1024 * 1024
    let size = 0
    const chunks = await Effect.runPromise(
      response.body.pipe(
        Stream.interruptWhen(Effect.sleep(options.timeoutMs ?? 30_000)),
        Stream.runFold([] as Array<Uint8Array>, (all, chunk) => {
          size += chunk.length
          // A bounded answer: the hub refuses more anyway, and this process keeps its memory.
          if (size > max) throw new Error(`the answer is over ${max} bytes`)
          all.push(chunk)
          return all
        })
      )
    )
    return { status: response.status, headers: response.headers, body: Buffer.concat(chunks) }
  }

const once = (options: Options, url: string): Promise<string> =>
  new Promise((resolve) => {
    const { cert, key } = options.identity()
    const ws = new WebSocket(url, [MemberTunnel.Subprotocol], { ca: options.ca, cert, key, ...(options.token === undefined ? {} : { headers: { authorization: `Bearer ${options.token}` } }), perMessageDeflate: false, handshakeTimeout: 10_000, maxPayload: 16 * 1024 * 1024 })
    let alive = true
    let ping: ReturnType<typeof setInterval> | undefined
    ws.once("unexpected-response", (_req, res) => {
      res.resume()
      resolve(`the hub answered ${res.statusCode ?? 0}`)
    })
    ws.once("error", (e) => resolve(e.message))
    ws.once("open", () => {
      options.onState?.("open")
      ws.on("pong", () => (alive = true))
      ping = setInterval(() => {
        if (!alive) return ws.terminate()
        alive = false
        ws.ping()
      }, options.pingMs ?? 15_000)
      void MemberTunnel.serve(messageSocket(ws), options.answer).finally(() => {
        clearInterval(ping)
        ws.terminate()
        resolve("the tunnel closed")
      })
    })
  })

/** Keep the tunnel open for as long as the scope lives. */
export const run = (options: Options): Effect.Effect<void, never, Scope.Scope> =>
  Effect.forkScoped(
    Effect.gen(function* () {
      const url = `${options.hub.replace(/^https:/, "wss:")}/apis/federation.fleet.koder.dev/v1alpha1/memberclusters/${encodeURIComponent(options.member)}/tunnel`
      let pauseMs = 1_000
      for (;;) {
        const started = Date.now()
        const why = yield* Effect.promise(() => once(options, url))
        options.onState?.("closed", why)
        // A tunnel that stayed up a while was healthy: start the pauses over.
        if (Date.now() - started > 60_000) pauseMs = 1_000
        yield* Effect.sleep(pauseMs)
        pauseMs = Math.min(30_000, pauseMs * 2)
      }
    })
  ).pipe(Effect.asVoid)
