/**
 * The API server's graceful shutdown, once draining has begun: stop accepting, end watches,
 * drain requests (bounded), then close what connections are left.
 */
import { Deferred, type Duration, Effect, Exit, Fiber } from "effect"
import type { Server } from "node:https"

/** What the drain stops. */
export interface Draining {
  readonly server: Server
  /** Completed here: streams end as if they were over. */
  readonly stopping: Deferred.Deferred<void>
  /** Watches being served (they get 5 s to end). */
  readonly watches: Set<Fiber.RuntimeFiber<void>>
  /** Other requests being served (they get `shutdownGrace`). */
  readonly requests: Set<Fiber.RuntimeFiber<void>>
  /**
   * Sockets of WebSocket sessions (exec, attach, port-forward, members' tunnels): the HTTP server
   * no longer closes them, and its close waits for them, so the drain destroys what is left of them.
   */
  readonly upgraded: ReadonlySet<{ destroy: () => void }>
  readonly shutdownGrace: Duration.DurationInput
}

/**
 * Wait for `fibers` up to `within`, then interrupt those left. The wait itself is interruptible:
 * a drain runs in a finalizer or an interruption handler (uninterruptible regions), where a
 * timeout could not otherwise cut it short, and a session that never ends by itself (a member's
 * tunnel, an exec) would hold the shutdown until the hard deadline.
 */
const awaitAll = (fibers: Set<Fiber.RuntimeFiber<void>>, within: Duration.DurationInput) =>
  Fiber.awaitAll([...fibers]).pipe(
    Effect.interruptible,
    Effect.timeout(within),
    Effect.catchAll(() => Fiber.interruptAll([...fibers]))
  )

/** Run the drain; it completes once every connection is closed. */
export const drain = (d: Draining): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { server } = d
    let closed = false
    const allClosed = yield* Deferred.make<void>()
    // Stop accepting; the callback runs once every connection is gone.
    server.close(() => {
      closed = true
      Deferred.unsafeDone(allClosed, Exit.void)
    })
    server.closeIdleConnections()
    yield* Deferred.succeed(d.stopping, undefined)
    yield* awaitAll(d.watches, "5 seconds")
    yield* awaitAll(d.requests, d.shutdownGrace)
    // Responses sent while draining carry `connection: close`; a connection that served a
    // watch goes idle when the watch ends. Close idle ones as they appear, for a moment,
    // then cut whatever is left (a client that sent headers and nothing else).
    const deadline = Date.now() + 1000
    while (!closed && Date.now() < deadline) {
      server.closeIdleConnections()
      yield* Effect.sleep("20 millis")
    }
    server.closeAllConnections()
    for (const socket of [...d.upgraded]) socket.destroy()
    yield* Deferred.await(allClosed)
  })
