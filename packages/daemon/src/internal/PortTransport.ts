/**
 * The API across a thread boundary: a `Client.Transport` in a worker thread whose requests the
 * main thread's API handler answers, over a `MessagePort`. Dev mode runs its node (agent and box)
 * in a worker so that the node's work uses the second core instead of delaying the API's; every
 * request still passes authentication, authorization and admission, as with `InProcess.transport`.
 *
 *   worker: Client ─▶ transport(port) ── req {id, method, path, query, headers, body} ──▶ serve(port, handle)
 *                              ◀── json {id, status, headers, body (JSON text)}             (one document)
 *                              ◀── head {id, status, headers}, chunk {id, data}…, end {id}   (a watch)
 *                              ── cancel {id} ──▶ the watch's fiber is interrupted
 *
 * JSON bodies cross as text (the client parses its own copy anyway); watch chunks cross as copies
 * whose buffers are transferred, never as views of a pooled buffer.
 */
import { Status, type Client, type Http, type InProcess } from "@koder/fleet-core"
import { Cause, Effect, Fiber, Runtime, Stream, type Scope } from "effect"
import type { MessagePort } from "node:worker_threads"

type Request = {
  readonly t: "req"
  readonly id: number
  readonly method: string
  readonly path: string
  readonly query: string
  readonly headers: Readonly<Record<string, string | undefined>>
  readonly body: Uint8Array | undefined
}
type Reply =
  | { readonly t: "json"; readonly id: number; readonly status: number; readonly headers: Readonly<Record<string, string>>; readonly body: string }
  | { readonly t: "head"; readonly id: number; readonly status: number; readonly headers: Readonly<Record<string, string>> }
  | { readonly t: "chunk"; readonly id: number; readonly data: Uint8Array }
  | { readonly t: "end"; readonly id: number }
type Cancel = { readonly t: "cancel"; readonly id: number }

const own = (data: Uint8Array): Uint8Array => {
  const copy = new Uint8Array(data.byteLength)
  copy.set(data)
  return copy
}

/**
 * Answer the requests arriving on `port` with `handle` (as `client`, for in-flight accounting)
 * until the scope closes; then every open watch ends and the port closes.
 */
export const serve = (port: MessagePort, handle: InProcess.Handle, client: string): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<never>()
    const run = Runtime.runFork(runtime)
    const open = new Map<number, Fiber.RuntimeFiber<void, unknown>>()
    const post = (reply: Reply, transfer?: ReadonlyArray<ArrayBuffer>) => port.postMessage(reply, transfer as Array<ArrayBuffer> | undefined)
    const answer = (request: Request) => {
      let streaming = false
      return Effect.gen(function* () {
        const response = yield* handle({
          method: request.method,
          path: request.path,
          query: new URLSearchParams(request.query),
          headers: request.headers,
          body: request.body,
          client
        })
        if (response._tag === "Json") {
          const body = typeof response.body === "string" ? response.body : JSON.stringify(response.body)
          return post({ t: "json", id: request.id, status: response.status, headers: response.headers, body })
        }
        if (response._tag === "Upgrade") {
          const status = { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: "a worker's client cannot upgrade a connection", reason: "BadRequest", code: 400 }
          return post({ t: "json", id: request.id, status: 400, headers: { "content-type": "application/json" }, body: JSON.stringify(status) })
        }
        post({ t: "head", id: request.id, status: response.status, headers: response.headers })
        streaming = true
        yield* Stream.runForEach(response.body, (data) =>
          Effect.sync(() => {
            const copy = own(data)
            post({ t: "chunk", id: request.id, data: copy }, [copy.buffer as ArrayBuffer])
          })
        )
        post({ t: "end", id: request.id })
      }).pipe(
        // The caller waits for an answer whatever happens here: a handler that dies answers 500 (as
        // the HTTP layer does), a stream that dies ends the watch. A cancelled one needs nothing.
        Effect.catchAllCause((cause) =>
          Effect.sync(() => {
            if (Cause.isInterruptedOnly(cause)) return
            if (streaming) return post({ t: "end", id: request.id })
            const status = Status.internalError(`${request.method} ${request.path} failed`)
            post({ t: "json", id: request.id, status: 500, headers: { "content-type": "application/json" }, body: JSON.stringify(status) })
          })
        )
      )
    }
    const onMessage = (message: Request | Cancel) => {
      if (message.t === "cancel") {
        const fiber = open.get(message.id)
        if (fiber !== undefined) run(Fiber.interrupt(fiber))
        return
      }
      const fiber = run(answer(message))
      open.set(message.id, fiber)
      fiber.addObserver(() => open.delete(message.id))
    }
    port.on("message", onMessage)
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        port.off("message", onMessage)
        yield* Fiber.interruptAll([...open.values()])
        port.close()
      })
    )
  })

/** A `Client.Transport` whose requests `serve` answers on the other side of `port`. */
export const transport = (port: MessagePort): Client.Transport => {
  let next = 0
  const waiting = new Map<number, (reply: Reply) => void>()
  port.on("message", (reply: Reply) => waiting.get(reply.id)?.(reply))
  return (request) =>
    Effect.async<Http.ApiResponse>((resume) => {
      const id = ++next
      let streaming = false
      waiting.set(id, (reply) => {
        if (reply.t === "json") {
          waiting.delete(id)
          return resume(Effect.succeed({ _tag: "Json", status: reply.status, headers: reply.headers, body: reply.body }))
        }
        if (reply.t !== "head") return
        streaming = true
        resume(Effect.succeed({ _tag: "Stream", status: reply.status, headers: reply.headers, body: watchBody(id) }))
      })
      port.postMessage({
        t: "req",
        id,
        method: request.method,
        path: request.path,
        query: request.query.toString(),
        headers: request.headers,
        body: request.body
      } satisfies Request)
      // Interrupted before the answer (or a stream never read): the other side stops working on it.
      return Effect.sync(() => {
        if (streaming) return
        waiting.delete(id)
        port.postMessage({ t: "cancel", id } satisfies Cancel)
      })
    })

  /** The chunks of watch `id`: those that arrive before it is read are kept for it. */
  function watchBody(id: number): Stream.Stream<Uint8Array> {
    const early: Array<Uint8Array> = []
    let ended = false
    waiting.set(id, (reply) => {
      if (reply.t === "chunk") early.push(reply.data)
      else if (reply.t === "end") ended = true
    })
    return Stream.async<Uint8Array>((emit) => {
      for (const data of early.splice(0)) void emit.single(data)
      if (ended) {
        waiting.delete(id)
        void emit.end()
        return
      }
      waiting.set(id, (reply) => {
        if (reply.t === "chunk") void emit.single(reply.data)
        else if (reply.t === "end") {
          waiting.delete(id)
          void emit.end()
        }
      })
      return Effect.sync(() => {
        if (!waiting.has(id)) return
        waiting.delete(id)
        port.postMessage({ t: "cancel", id } satisfies Cancel)
      })
    }, "unbounded")
  }
}
