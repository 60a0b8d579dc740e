/**
 * Watch across processes: every commit, by any process, reaches this store's WatchFeed. NOTIFY
 * only says "the head moved" (its payload is a revision, a hint); the events themselves are read
 * by ONE poller per store, `revision > feed.head()` in revision order, and published densely. The
 * poller also runs on a slow timer and after every (re)connection of the LISTEN connection, so a
 * lost notification or a dropped connection delays an event but never loses one.
 *
 *   LISTEN conn ──notification(rev > head)──┐
 *   slow timer (1 s) ───────────────────────┼─▶ wake ─▶ poll: SELECT … WHERE revision > head
 *   (re)connect / local commit out of turn ─┘                ORDER BY revision LIMIT n ─▶ feed.publish
 */
import pg from "pg"
import type { WatchFeed } from "@koder/fleet-core"
import { clientConfig, type ConnectOptions } from "./connection.js"
import type { LogQueries } from "./logQueries.js"

/** Counters of the read side (for tests and metrics). */
export interface PollStats {
  readonly polls: number
  readonly pollFailures: number
  readonly notifications: number
  /** Times the LISTEN connection was (re)established. */
  readonly listens: number
  readonly listening: boolean
}

/** A running poller. */
export interface ChangePoller {
  /** Poll soon (coalesces). */
  readonly wake: () => void
  /** Stop listening and polling; resolves when the current poll has finished. */
  readonly stop: () => Promise<void>
  readonly stats: () => PollStats
}

/** Options of the poller. */
export interface Options {
  readonly connect: ConnectOptions
  readonly channel: string
  readonly pool: pg.Pool
  readonly queries: LogQueries
  readonly feed: WatchFeed.WatchFeed
  /** The slow safety-net poll (default 1,000 ms). */
  readonly slowPollMillis?: number
  /** Events per poll (default 1,000). */
  readonly pageSize?: number
}

const minBackoff = 50
const maxBackoff = 2_000

/** Start listening and polling. */
export const make = (options: Options): ChangePoller => {
  const { feed, queries, pool } = options
  const pageSize = options.pageSize ?? 1_000
  let stopped = false
  let polling: Promise<void> | undefined
  let dirty = false
  let listener: pg.Client | undefined
  let connecting: Promise<void> | undefined
  let polls = 0
  let pollFailures = 0
  let notifications = 0
  let listens = 0
  const timers = new Set<{ timer: NodeJS.Timeout; resolve: () => void }>()

  /** Sleep that ends early when the poller stops. */
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      if (stopped) return resolve()
      const entry = { timer: setTimeout(() => done(), ms), resolve: () => done() }
      const done = () => {
        clearTimeout(entry.timer)
        timers.delete(entry)
        resolve()
      }
      timers.add(entry)
    })

  const pollLoop = async () => {
    let backoff = minBackoff
    while (dirty && !stopped) {
      dirty = false
      polls++
      try {
        const batch = await queries.events(pool, "", feed.head(), Number.MAX_SAFE_INTEGER, pageSize, false)
        // A local commit may have published some of these meanwhile; both are prefixes of one
        // dense sequence, so what is left starts right after the head.
        const head = feed.head()
        const fresh = batch.events.filter((e) => e.revision > head)
        if (fresh.length > 0) feed.publish(fresh)
        if (batch.events.length === pageSize) dirty = true
        backoff = minBackoff
      } catch {
        pollFailures++
        dirty = true
        await pause(backoff)
        backoff = Math.min(backoff * 2, maxBackoff)
      }
    }
  }

  const wake = () => {
    dirty = true
    if (polling === undefined && !stopped) {
      polling = pollLoop().finally(() => {
        polling = undefined
        if (dirty && !stopped) wake()
      })
    }
  }

  const listen = async () => {
    let backoff = minBackoff
    while (!stopped) {
      const client = new pg.Client(clientConfig(options.connect))
      // Errors surface as 'end' below (or as the failed connect); without a listener they would crash.
      client.on("error", () => {})
      try {
        await client.connect()
        await client.query(`LISTEN "${options.channel}"`)
      } catch {
        await client.end().catch(() => undefined)
        await pause(backoff)
        backoff = Math.min(backoff * 2, maxBackoff)
        continue
      }
      if (stopped) {
        await client.end().catch(() => undefined)
        return
      }
      listener = client
      listens++
      client.on("notification", (message) => {
        notifications++
        const revision = Number(message.payload)
        if (!(revision <= feed.head())) wake()
      })
      client.once("end", () => {
        if (listener === client) listener = undefined
        if (!stopped) reconnect()
      })
      // Whatever was committed while we were not listening.
      wake()
      return
    }
  }

  const reconnect = () => {
    if (connecting === undefined && !stopped) {
      connecting = pause(minBackoff)
        .then(listen)
        .finally(() => {
          connecting = undefined
        })
    }
  }

  connecting = listen().finally(() => {
    connecting = undefined
  })
  const slow = setInterval(wake, options.slowPollMillis ?? 1_000)
  slow.unref()

  return {
    wake,
    stop: async () => {
      stopped = true
      clearInterval(slow)
      for (const t of [...timers]) t.resolve()
      await connecting
      const client = listener
      listener = undefined
      await client?.end().catch(() => undefined)
      await polling
    },
    stats: () => ({ polls, pollFailures, notifications, listens, listening: listener !== undefined })
  }
}
