/** A container's log as the memory runtime serves it: a snapshot (since, tail), then live lines with `follow`. */
import { Clock, Effect, PubSub, Stream } from "effect"
import type * as Runtime from "../Runtime.js"
import { type Line, type Node, entryOf, iso } from "./memoryNode.js"

/** The chunk a log line is served as (with its time when `timestamps` is asked for). */
const chunkOf = (l: Line, timestamps: boolean): Runtime.LogChunk =>
  timestamps ? { stream: l.stream, line: l.line, timestamp: iso(l.at) } : { stream: l.stream, line: l.line }

/** The lines of a snapshot that `sinceSeconds` and `tailLines` keep, at time `now`. */
const headOf = (snapshot: ReadonlyArray<Line>, opts: Runtime.LogOptions, now: number): ReadonlyArray<Line> => {
  const since = opts.sinceSeconds === undefined ? -Infinity : now - opts.sinceSeconds * 1000
  const head = snapshot.filter((l) => l.at >= since)
  if (opts.tailLines === undefined) return head
  return opts.tailLines <= 0 ? [] : head.slice(-opts.tailLines)
}

/** `Containers.logs`: with `follow`, the stream ends when the container exits. */
export const logs = (
  node: Node,
  id: string,
  opts: Runtime.LogOptions = {}
): Stream.Stream<Runtime.LogChunk, Runtime.NotFound> =>
  Stream.unwrapScoped(
    Effect.gen(function* () {
      const e = yield* entryOf(node, id)
      // Subscribe before the snapshot so no line falls between them; `seq` drops repeats.
      const sub = yield* PubSub.subscribe(e.feed)
      const snapshot = e.lines.slice()
      const now = yield* Clock.currentTimeMillis
      const timestamps = opts.timestamps === true
      const first = Stream.fromIterable(headOf(snapshot, opts, now).map((l) => chunkOf(l, timestamps)))
      if (opts.follow !== true || e.container.status.state === "exited") return first
      const live = Stream.fromQueue(sub).pipe(
        Stream.takeWhile((l): l is Line => l !== null),
        Stream.filter((l) => l.seq >= snapshot.length),
        Stream.map((l) => chunkOf(l, timestamps))
      )
      return Stream.concat(first, live)
    })
  )
