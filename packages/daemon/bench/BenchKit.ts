/**
 * What the server benchmarks share: JSON-line results, percentiles, open-loop pacing, a bounded
 * pool, the client's own event-loop delay, and the pod a Deployment would make.
 */
import type { IncomingMessage } from "node:http"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { type BenchServer, type Response } from "./BenchServer.js"

export interface Result {
  readonly bench: string
  readonly unit: "ms" | "s" | "MiB"
  readonly value: number
  readonly params: Record<string, number | string>
}

export const print = (result: Result) => console.log(JSON.stringify(result))

export const round = (ms: number) => Math.round(ms * 100) / 100

/** Nearest-rank percentile of an ascending array. */
export const percentile = (sorted: ArrayLike<number>, p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN

export const ascending = (xs: Iterable<number>) => Float64Array.from(xs).sort()

/** A pod as a Deployment would make it: one container, labels, requests, a port. */
export const pod = (namespace: string, name: string) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace, labels: { app: "web", tier: "frontend", "pod-template-hash": "7c9f8d6b5" } },
  spec: {
    containers: [
      {
        name: "web",
        image: "nginx:1.27.2",
        ports: [{ name: "http", containerPort: 80, protocol: "TCP" }],
        env: [{ name: "LOG_LEVEL", value: "info" }],
        resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "500m", memory: "256Mi" } }
      }
    ],
    restartPolicy: "Always"
  }
})

export const expectStatus = (what: string, status: number, body: Buffer, ...ok: Array<number>) => {
  if (!ok.includes(status)) throw new Error(`${what}: HTTP ${status} ${body.toString().slice(0, 500)}`)
}

export const createNamespace = async (server: BenchServer, name: string) => {
  const r = await server.send("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name } })
  expectStatus(`create namespace ${name}`, r.status, r.body, 201)
}

/**
 * Call `fire(i)` for i in [0, total) at `rate` per second without waiting for anything `fire`
 * starts (open loop), returning how late each call was against its schedule (ms).
 */
export const paced = (rate: number, total: number, fire: (i: number) => void) =>
  new Promise<Float64Array>((resolve) => {
    const lateness = new Float64Array(total)
    const t0 = performance.now()
    let sent = 0
    const tick = () => {
      const now = performance.now()
      const due = Math.min(total, Math.floor(((now - t0) * rate) / 1000) + 1)
      while (sent < due) {
        lateness[sent] = performance.now() - (t0 + (sent * 1000) / rate)
        fire(sent++)
      }
      if (sent < total) setTimeout(tick, 1)
      else resolve(lateness)
    }
    tick()
  })

/** Run `task(i)` for i in [0, n) with `inflight` in flight. */
export const pool = async (n: number, inflight: number, task: (i: number) => Promise<void>) => {
  let next = 0
  const worker = async () => {
    while (next < n) await task(next++)
  }
  await Promise.all(Array.from({ length: Math.min(n, inflight) }, worker))
}

/** Measure the bench process's own event-loop delay around `body` (is the client keeping up?). */
export const withLoopDelay = async <A>(body: () => Promise<A>): Promise<[A, number]> => {
  const h = monitorEventLoopDelay({ resolution: 5 })
  h.enable()
  try {
    const a = await body()
    return [a, h.percentile(99) / 1e6]
  } finally {
    h.disable()
  }
}

/** CPU the server used since `before` (ms), as a params entry. */
export const cpuDelta = (server: BenchServer, before: number | undefined) => {
  const after = server.cpuMs()
  return before === undefined || after === undefined ? {} : { serverCpuMs: after - before }
}

/** One watch event as the fan-out measurement sees it. */
export interface WatchEvent {
  readonly type: string
  readonly object: { readonly metadata?: { readonly name?: string; readonly resourceVersion?: string } }
}

/** How to run a watch fan-out: `watchers` watches of `path`, and `writes` writes at `rate`/s. */
export interface FanoutOptions {
  readonly watchers: number
  readonly rate: number
  readonly writes: number
  /** The collection to watch (no query string); watches start at its current resourceVersion. */
  readonly path: string
  /**
   * Write number `i`; answers the key its watch event will carry (see `keyOf`), or throws, and
   * when the write had to wait for something first, when its request was actually sent.
   */
  readonly write: (i: number) => Promise<{ readonly response: Response; readonly key: string; readonly sentAt?: number }>
  /** The key of a watch event, matched against the writes' keys; undefined: not a write of ours. */
  readonly keyOf: (event: WatchEvent) => string | undefined
}

/** What a fan-out measured: delivery delays (acknowledgement → each watcher), write latencies. */
export interface FanoutResult {
  readonly delays: Float64Array
  readonly writeLatency: Float64Array
  readonly params: Record<string, number>
}

/**
 * Open `watchers` watches, write at a steady rate, and time every delivery of every write to every
 * watcher from the write's acknowledgement (a delivery before it counts as 0). Fails if a watcher
 * misses a write or a stream breaks.
 */
export const watchFanout = async (server: BenchServer, options: FanoutOptions): Promise<FanoutResult> => {
  const { watchers, rate, writes, path } = options
  const current = await server.send("GET", `${path}?limit=1`)
  expectStatus(`list ${path}`, current.status, current.body, 200)
  const resourceVersion = (JSON.parse(current.body.toString()) as { metadata: { resourceVersion: string } }).metadata.resourceVersion

  // key → receive times, one per watcher that saw it; acks as the writer saw them.
  const received = new Map<string, Array<number>>()
  const acked = new Map<string, number>()
  const problems: Array<string> = []
  const agent = server.agent(watchers + 16)
  const responses: Array<IncomingMessage> = []
  let closing = false

  const follow = (w: number, res: IncomingMessage) => {
    let pending = ""
    res.setEncoding("utf8")
    res.on("data", (chunk: string) => {
      const now = performance.now()
      pending += chunk
      let nl: number
      while ((nl = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, nl)
        pending = pending.slice(nl + 1)
        if (line.length === 0) continue
        const event = JSON.parse(line) as WatchEvent
        if (event.type === "ERROR") {
          problems.push(`watcher ${w}: ${line.slice(0, 300)}`)
          continue
        }
        const key = options.keyOf(event)
        if (key === undefined) continue
        let times = received.get(key)
        if (times === undefined) received.set(key, (times = []))
        times.push(now)
      }
    })
    res.on("end", () => {
      if (!closing) problems.push(`watcher ${w}: stream ended`)
    })
    res.on("error", (e) => {
      if (!closing) problems.push(`watcher ${w}: ${e.message}`)
    })
  }

  const t0 = performance.now()
  await pool(watchers, 50, async (w) => {
    const { status, response } = await server.stream(`${path}?watch=true&resourceVersion=${resourceVersion}`, agent)
    if (status !== 200) {
      let body = ""
      for await (const d of response) body += String(d)
      throw new Error(`watch ${w}: HTTP ${status} ${body.slice(0, 300)}`)
    }
    responses.push(response)
    follow(w, response)
  })
  const openMs = performance.now() - t0

  const failures: Array<string> = []
  const done: Array<Promise<void>> = []
  const writeLatency: Array<number> = []
  const cpu0 = server.cpuMs()
  const [, loopP99] = await withLoopDelay(async () => {
    await paced(rate, writes, (i) => {
      const t = performance.now()
      done.push(
        options.write(i).then(
          ({ response, key, sentAt }) => {
            writeLatency.push(response.end - (sentAt ?? t))
            acked.set(key, response.end)
          },
          (e: Error) => void failures.push(e.message)
        )
      )
    })
    await Promise.all(done)
    // Let the last events arrive (everything should be in within a second; wait up to 10).
    const deadline = Date.now() + 10_000
    const complete = () => [...acked.keys()].every((key) => (received.get(key)?.length ?? 0) >= watchers)
    while (!complete() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
  })
  const serverCpu = cpuDelta(server, cpu0)
  closing = true
  for (const res of responses) res.destroy()
  agent.destroy()
  if (failures.length > 0) throw new Error(`watch: ${failures.length} of ${writes} writes failed, e.g. ${failures[0]}`)

  const delays: Array<number> = []
  let missing = 0
  let early = 0
  for (const [key, ack] of acked) {
    const times = received.get(key) ?? []
    missing += Math.max(0, watchers - times.length)
    for (const t of times) {
      if (t < ack) early++
      delays.push(Math.max(0, t - ack))
    }
  }
  const expected = writes * watchers
  if (missing > 0 || problems.length > 0 || delays.length !== expected) {
    throw new Error(`watch: ${missing} of ${expected} deliveries missing; ${problems.length} stream problems${problems.length > 0 ? `, e.g. ${problems[0]}` : ""}`)
  }
  const sorted = ascending(delays)
  const writesSorted = ascending(writeLatency)
  return {
    delays: sorted,
    writeLatency: writesSorted,
    params: {
      watchers,
      writes,
      rate,
      expected,
      delivered: delays.length,
      deliveredBeforeAck: early,
      openMs: round(openMs),
      maxMs: round(sorted[sorted.length - 1] ?? NaN),
      // The writes' own latency (send → acknowledgement): fan-out work delays them too.
      writeP99Ms: round(percentile(writesSorted, 99)),
      clientLoopDelayP99Ms: round(loopP99),
      ...serverCpu
    }
  }
}
