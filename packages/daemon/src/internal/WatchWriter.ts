/**
 * Writes a watch's events to its response at the pace its client reads them, so a client that
 * stops reading costs a bounded amount of memory and is eventually closed (issue 29: 500 watches
 * from resourceVersion 0 that were never read held a copy of a namespace each, 2 GB in all).
 *
 *   event lines (shared bytes) ─▶ write while unsent ≤ window ─▶ socket ─▶ flushed (callback)
 *                                     │ over the window: wait for flushes, at most `stallTimeout`
 *                                     └ user's WatchBudget passed, or stalled: close the connection
 *
 * "Unsent" is what was handed to the response and whose write has not completed: the bytes Node
 * and the TLS layer buffer for this connection (the TLS layer keeps its own encrypted copy). The
 * lines themselves are the watch cache's shared serialisations; only the window is per watch.
 * A write callback fires once the kernel took the bytes, which makes the count exact where
 * `res.write` returning false (the socket's 8 MiB high-water mark) would let each watch buffer
 * megabytes first. A closed connection is reset, which frees its buffers at once (the kernel's
 * too); the client re-lists and re-watches, as after kube-apiserver closes a watcher that cannot
 * keep up.
 */
import type { WatchBudget } from "@koder/fleet-core"
import { Chunk, Duration, Effect, Stream } from "effect"
import type { ServerResponse } from "node:http"
import type { Socket } from "node:net"

/** How a watch's writes are paced. */
export interface Options {
  /** Bytes a watch may have unsent before it stops taking events and waits (default 256 KiB). */
  readonly window: number
  /** How long a watch may wait for its client to take bytes before it is closed (default 60 s). */
  readonly stallTimeout: Duration.DurationInput
}

/** The defaults of `Options`. */
export const defaults: Options = { window: 256 * 1024, stallTimeout: "60 seconds" }

/** Why a watch's connection was closed by the writer. */
export type Closed = "over-budget" | "stalled"

/**
 * Write `body` (one event per element) to `res`, accounting unsent bytes in `backlog`. Ends when
 * the body ends, or when the connection is closed (by the client, or here: `onClosed` says why).
 */
export const write = (
  res: ServerResponse,
  body: Stream.Stream<Uint8Array>,
  backlog: WatchBudget.Backlog,
  options: Options,
  onClosed: (why: Closed) => void = () => {}
): Effect.Effect<void> => {
  const window = Math.max(1, options.window)
  const stallMillis = Duration.toMillis(Duration.decode(options.stallTimeout))
  let unsent = 0
  // Set while a write waits for flushes: called after each one.
  let onFlush: (() => void) | undefined
  const close = (why: Closed) => {
    // A reset, not a FIN: a FIN would wait behind the unread bytes, which the kernel would keep
    // sending into the client's zero window; a reset drops them. (The TLS socket wraps the TCP one.)
    const tcp = (res.socket as (Socket & { readonly _parent?: Socket }) | null)?._parent ?? res.socket
    try {
      tcp?.resetAndDestroy()
    } catch {
      // Not a TCP handle (a test's socket): the plain destroy below does.
    }
    res.destroy()
    backlog.release()
    onClosed(why)
  }

  const writeLines = (chunk: Chunk.Chunk<Uint8Array>): Effect.Effect<void> =>
    Effect.async<void>((resume) => {
      const lines = Chunk.toReadonlyArray(chunk)
      let next = 0
      let timer: ReturnType<typeof setTimeout> | undefined
      const settle = (effect: Effect.Effect<void>) => {
        if (timer !== undefined) clearTimeout(timer)
        timer = undefined
        onFlush = undefined
        resume(effect)
      }
      const step = (): void => {
        if (res.destroyed || res.writableEnded) return settle(Effect.interrupt)
        const first = next
        let batch = 0
        while (next < lines.length && unsent + batch <= window) {
          const size = lines[next]!.length
          if (!backlog.write(size)) {
            close("over-budget")
            return settle(Effect.interrupt)
          }
          batch += size
          next++
        }
        if (batch > 0) {
          unsent += batch
          const written = batch
          const flushed = () => {
            unsent -= written
            backlog.flushed(written)
            onFlush?.()
          }
          // One corked batch: the lines leave as one HTTP chunk; the last one's callback runs
          // once the whole batch was written.
          res.cork()
          for (let i = first; i < next; i++) res.write(lines[i]!, i === next - 1 ? flushed : undefined)
          res.uncork()
        }
        // Take no more events while over the window: they stay in the watch cache (shared).
        if (next >= lines.length && unsent <= window) return settle(Effect.void)
        onFlush = () => {
          if (unsent <= window) {
            onFlush = undefined
            if (timer !== undefined) clearTimeout(timer)
            timer = undefined
            step()
          }
        }
        timer ??= setTimeout(() => {
          close("stalled")
          settle(Effect.interrupt)
        }, stallMillis)
      }
      step()
      return Effect.sync(() => {
        if (timer !== undefined) clearTimeout(timer)
        onFlush = undefined
      })
    })

  return Stream.runForEachChunk(body, writeLines).pipe(Effect.ensuring(Effect.sync(() => backlog.release())))
}
