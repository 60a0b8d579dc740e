/**
 * Streaming a response chunk by chunk: a watch under its user's admission and paced by
 * WatchWriter, anything else (a followed log) waiting for 'drain' when the socket's buffer is
 * full. On shutdown a stream ends as if it were over, so its client sees a clean end.
 */
import type { Http } from "@koder/fleet-core"
import { Deferred, Duration, Effect, type Fiber, Stream } from "effect"
import type { ServerResponse } from "node:http"
import * as UserWatches from "./UserWatches.js"
import * as WatchWriter from "./WatchWriter.js"

/** What every stream of one server shares. */
export interface Streams {
  /** Completed when shutdown begins. */
  readonly stopping: Deferred.Deferred<void>
  /** Watch admission per user. */
  readonly users: UserWatches.UserWatches
  /** How watches' writes are paced. */
  readonly pacing: WatchWriter.Options
  /** Forks in the server's runtime (for the log line of a closed watch). */
  readonly runFork: (effect: Effect.Effect<void>) => Fiber.RuntimeFiber<void>
}

/** Write one chunk, waiting for 'drain' when the socket's buffer is full. */
const writeChunk = (res: ServerResponse, chunk: Uint8Array): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    if (res.destroyed || res.writableEnded) return resume(Effect.interrupt)
    if (res.write(chunk)) return resume(Effect.void)
    const done = () => {
      res.off("drain", done)
      res.off("close", done)
      resume(res.destroyed ? Effect.interrupt : Effect.void)
    }
    res.once("drain", done)
    res.once("close", done)
    return Effect.sync(() => {
      res.off("drain", done)
      res.off("close", done)
    })
  })

/** Stream `response` to `res` until it ends, its client goes, or shutdown begins. */
export const serve = (streams: Streams, res: ServerResponse, response: Http.StreamResponse): Effect.Effect<void> =>
  Effect.gen(function* () {
    if (res.destroyed) return
    const backlog = response.watch === undefined ? undefined : UserWatches.admit(streams.users, res, response.watch)
    if (backlog === false) return
    res.writeHead(response.status, response.headers)
    res.flushHeaders() // a watcher learns at once that its watch is established
    const written =
      backlog === undefined
        ? Stream.runForEach(response.body, (chunk) => writeChunk(res, chunk))
        : WatchWriter.write(res, response.body, backlog, streams.pacing, (why) =>
            streams.runFork(Effect.logInfo(`watch of user ${JSON.stringify(backlog.user)} closed: ${why === "stalled" ? `its client read nothing for ${Duration.format(streams.pacing.stallTimeout)}` : "its user's watch budget is spent"}`))
          )
    // On shutdown the stream ends as if the watch were over, so the client sees a clean end.
    // The race is set up once per watch: per-chunk combinators would fork per chunk.
    yield* Effect.raceFirst(written, Deferred.await(streams.stopping))
    if (!res.destroyed) res.end()
  })
