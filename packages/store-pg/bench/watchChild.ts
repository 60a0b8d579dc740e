// The watcher process of `store.pg.watch.p99`: watches `lat/` from a revision and prints
// `E <revision> <epoch ms, fractional>` per delivered event (performance.timeOrigin + now(),
// comparable across processes on one machine). Prints `READY` once watching; exits when stdin closes.
// Usage: watchChild.ts <url> <schema> <fromRevision>
import { Effect, Stream } from "effect"
import { PgStore } from "../src/index.js"

const [url, schema, from] = process.argv.slice(2)
if (!url || !schema || !from) {
  console.error("usage: watchChild.ts <url> <schema> <fromRevision>")
  process.exit(2)
}
process.stdin.on("close", () => process.exit(0))
process.stdin.resume()

await Effect.runPromise(
  Effect.scoped(
    Effect.gen(function* () {
      const store = yield* PgStore.make({ url, schema, applicationName: "fleet-bench-watcher", poolSize: 2 })
      const stream = store.watch("lat/", Number(from))
      console.log("READY")
      yield* Stream.runForEach(Stream.chunks(stream), (chunk) =>
        Effect.sync(() => {
          const at = performance.timeOrigin + performance.now()
          process.stdout.write(Array.from(chunk, (e) => `E ${e.revision} ${at}\n`).join(""))
        })
      )
    })
  )
)
