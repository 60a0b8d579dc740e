/**
 * Benchmark harness: one real `koder-fleet server` child process (SQLite store, default durable
 * settings, a temp data dir removed on stop) and a keep-alive HTTPS client carrying the CA and
 * token of the kubeconfig it wrote. `FLEET_BENCH_CPU_PROF=DIR` runs the server under
 * `node --cpu-prof` and leaves its `.cpuprofile` in DIR after a clean stop; `FLEET_BENCH_NODE_FLAGS`
 * adds Node or V8 flags (space-separated) to the server's command line.
 */
import { spawn, type ChildProcess } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import type { IncomingMessage } from "node:http"
import { mkdtemp, rm } from "node:fs/promises"
import { Agent, request as httpsRequest } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parse } from "yaml"

const main = fileURLToPath(new URL("../src/main.ts", import.meta.url))
const listening = /koder-fleet (?:server|dev|hub) listening on https:\/\/(\S+):(\d+) \(kubeconfig: (.+)\)/

/** A response read to the end, with the time its last byte arrived. */
export interface Response {
  readonly status: number
  readonly body: Buffer
  /** `performance.now()` when the response's first body byte arrived (its end for an empty body). */
  readonly firstByte: number
  /** `performance.now()` at the response's end. */
  readonly end: number
}

/** A running server and a client of it. */
export interface BenchServer {
  readonly pid: number
  /** Send one request; `body` objects are sent as JSON. */
  readonly send: (method: string, path: string, body?: unknown) => Promise<Response>
  /** Open a streaming GET (a watch); resolves once the response headers arrive. */
  readonly stream: (path: string, agent: Agent) => Promise<{ readonly status: number; readonly response: IncomingMessage }>
  /** A keep-alive agent trusting the server's CA, for callers that need sockets of their own. */
  readonly agent: (maxSockets: number) => Agent
  /** CPU time (user + system, ms) the server process has used so far; undefined off Linux. */
  readonly cpuMs: () => number | undefined
  /**
   * The server's main thread so far (ms): time on a CPU, and time runnable but waiting for one
   * (`/proc/<pid>/task/<pid>/schedstat`); undefined off Linux. A wait as long as the run time
   * means the machine, not the thread, is the limit.
   */
  readonly mainThread: () => { readonly runMs: number; readonly waitMs: number } | undefined
  /**
   * CPU time (user + system, ms) of the server's threads so far, summed by thread name (each
   * task's `comm` under `/proc/<pid>/task`): "main" is the main thread, "fleet-node" dev's node
   * thread, and "node" the rest (V8's GC and compiler threads, libuv's pool); undefined off Linux.
   */
  readonly threadsCpuMs: () => Readonly<Record<string, number>> | undefined
  /** The server's resident memory now and at its peak (MiB); undefined off Linux. */
  readonly rssMiB: () => { readonly now: number; readonly peak: number } | undefined
  /** `https://host:port` as it listens, and what it has printed so far. */
  readonly url: string
  readonly stdout: () => string
  /** SIGTERM, wait for the drain (SIGKILL after 20 s), remove the data dir (unless it was given). */
  readonly stop: () => Promise<void>
}

/** The space-separated words of an environment variable (a knob listing flags); none when unset. */
export const envWords = (name: string): Array<string> => (process.env[name] ?? "").split(" ").filter((w) => w !== "")

/** Print progress (stderr: stdout carries only JSON lines). */
export const log = (message: string): void => {
  process.stderr.write(`api bench: ${message}\n`)
}

const waitFor = async <A>(check: () => A | undefined, ms: number, what: string): Promise<A> => {
  const deadline = Date.now() + ms
  for (;;) {
    const v = check()
    if (v !== undefined) return v
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

/** CPU time (ms) in a `/proc` stat file: a process's, or one of its tasks'. */
const statCpuMs = (file: string): number | undefined => {
  try {
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15 (ticks of 10 ms).
    const stat = readFileSync(file, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[11]) + Number(fields[12])) * 10
  } catch {
    return undefined
  }
}

const procCpuMs = (pid: number): number | undefined => statCpuMs(`/proc/${pid}/stat`)

const procThreadsCpuMs = (pid: number): Record<string, number> | undefined => {
  try {
    const out: Record<string, number> = {}
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const name = tid === String(pid) ? "main" : readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim()
        out[name] = (out[name] ?? 0) + (statCpuMs(`/proc/${pid}/task/${tid}/stat`) ?? 0)
      } catch {
        // The thread ended between the listing and the read.
      }
    }
    return out
  } catch {
    return undefined
  }
}

const procSchedMs = (pid: number) => {
  try {
    const [run, wait] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").split(" ").map(Number)
    return { runMs: Math.round(run! / 1e6), waitMs: Math.round(wait! / 1e6) }
  } catch {
    return undefined
  }
}

/**
 * CPU time all processes of the machine have used so far (ms, from `/proc/stat`): the server, its
 * pods' processes, the benchmark itself; undefined off Linux.
 */
export const machineCpuMs = (): number | undefined => {
  try {
    // user nice system idle iowait irq softirq steal (guest time, after them, is already in user).
    const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1, 9).map(Number)
    const busy = fields.reduce((a, b) => a + b, 0) - fields[3]! - fields[4]!
    return busy * 10
  } catch {
    return undefined
  }
}

const procRssMiB = (pid: number) => {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8")
    const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1])
    return { now: Math.round(kib("VmRSS") / 1024), peak: Math.round(kib("VmHWM") / 1024) }
  } catch {
    return undefined
  }
}

/**
 * Start a server (plus `flags`) and connect a client to it: in a fresh temp data dir removed on
 * stop, or in `dataDir`, which is kept (a restart benchmark starts the same state twice).
 */
export const start = async (flags: ReadonlyArray<string> = [], role: "server" | "dev" | "hub" = "server", dataDir?: string): Promise<BenchServer> => {
  const dir = dataDir ?? (await mkdtemp(join(tmpdir(), "fleet-api-bench-")))
  const removeDir = () => (dataDir === undefined ? rm(dir, { recursive: true, force: true }) : Promise.resolve())
  const profDir = process.env["FLEET_BENCH_CPU_PROF"]
  const nodeFlags = ["--conditions=@koder/source", "--import", "tsx", ...envWords("FLEET_BENCH_NODE_FLAGS"), ...(profDir ? ["--cpu-prof", "--cpu-prof-dir", profDir] : [])]
  const child: ChildProcess = spawn(process.execPath, [...nodeFlags, main, role, "--data-dir", dir, "--listen", "127.0.0.1:0", ...flags], {
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  let err = ""
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()))
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()))
  let exitCode: number | string | undefined
  const exited = new Promise<number | string>((resolve) =>
    child.once("exit", (code, signal) => {
      exitCode = code ?? signal ?? -1
      resolve(exitCode)
    })
  )
  const kill = async () => {
    if (exitCode === undefined) child.kill("SIGKILL")
    await removeDir()
  }

  try {
    const m = await waitFor(
      () => {
        if (exitCode !== undefined) throw new Error(`server exited (${exitCode}) before listening:\n${out}\n${err}`)
        return listening.exec(out) ?? undefined
      },
      60_000,
      "the server's listening line"
    )
    const port = Number(m[2])
    const k = parse(readFileSync(m[3]!, "utf8")) as {
      clusters: Array<{ cluster: { "certificate-authority-data": string } }>
      users: Array<{ user: { token: string } }>
    }
    const ca = Buffer.from(k.clusters[0]!.cluster["certificate-authority-data"], "base64").toString()
    const authorization = `Bearer ${k.users[0]!.user.token}`
    const agent = (maxSockets: number) => new Agent({ ca, keepAlive: true, maxSockets, maxFreeSockets: maxSockets })
    // Like a real client (client-go keeps a small connection pool): a fixed set of keep-alive
    // connections, so an overloaded server is not also handed a storm of TLS handshakes.
    const requests = agent(64)

    // A keep-alive socket the server closes as idle just as a request goes out fails with
    // ECONNRESET before anything was processed; like Node's documentation advises, such a request
    // is sent again once on a fresh socket (slow open-loop pacing leaves sockets idle for seconds).
    const send = (method: string, path: string, body?: unknown, retried = false): Promise<Response> =>
      new Promise<Response>((resolve, reject) => {
        const headers: Record<string, string | number> = { authorization, accept: "application/json" }
        const payload = body === undefined ? undefined : JSON.stringify(body)
        if (payload !== undefined) {
          headers["content-type"] = "application/json"
          headers["content-length"] = Buffer.byteLength(payload)
        }
        const req = httpsRequest({ host: "127.0.0.1", port, method, path, headers, agent: requests, servername: "localhost" }, (res) => {
          const chunks: Array<Buffer> = []
          let firstByte: number | undefined
          res.on("data", (d: Buffer) => {
            firstByte ??= performance.now()
            chunks.push(d)
          })
          res.on("end", () => {
            const end = performance.now()
            resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), firstByte: firstByte ?? end, end })
          })
          res.on("error", reject)
        })
        req.on("error", (e: NodeJS.ErrnoException) =>
          !retried && req.reusedSocket && e.code === "ECONNRESET" ? resolve(send(method, path, body, true)) : reject(e)
        )
        req.end(payload)
      })

    const stream = (path: string, via: Agent) =>
      new Promise<{ status: number; response: IncomingMessage }>((resolve, reject) => {
        const req = httpsRequest({ host: "127.0.0.1", port, path, headers: { authorization }, agent: via, servername: "localhost" }, (res) =>
          resolve({ status: res.statusCode ?? 0, response: res })
        )
        req.on("error", reject)
        req.end()
      })

    const stop = async () => {
      requests.destroy()
      if (exitCode === undefined) {
        child.kill("SIGTERM")
        const timer = setTimeout(() => child.kill("SIGKILL"), 20_000)
        const code = await exited
        clearTimeout(timer)
        if (code !== 0) log(`server exited with ${code}:\n${err}`)
      }
      await removeDir()
    }

    return { pid: child.pid!, url: `https://${m[1]}:${port}`, stdout: () => out, send, stream, agent, cpuMs: () => procCpuMs(child.pid!), mainThread: () => procSchedMs(child.pid!), threadsCpuMs: () => procThreadsCpuMs(child.pid!), rssMiB: () => procRssMiB(child.pid!), stop }
  } catch (e) {
    await kill()
    throw e
  }
}
