/**
 * Test fixture of the client-node compatibility suite: one real `koder-fleet server` in a
 * temporary data dir, and `@kubernetes/client-node` configured only from the kubeconfig that
 * server wrote (`KubeConfig.loadFromFile`), exactly as a user's program would be.
 */
import { existsSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { request as httpsRequest } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  ApiException,
  ApiextensionsV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  setHeaderOptions,
  type PatchStrategy,
  type V1Status
} from "@kubernetes/client-node"
import { client, credentials, start, type FleetProcess, type Response } from "../fixtures/FleetProcess.js"

/** A running server and the client-node APIs pointed at it. */
export interface Cluster {
  readonly dir: string
  /** The current server process (replaced by `restart`). */
  readonly server: () => FleetProcess
  readonly kubeconfig: KubeConfig
  readonly core: CoreV1Api
  readonly apps: AppsV1Api
  readonly extensions: ApiextensionsV1Api
  readonly custom: CustomObjectsApi
  /**
   * A raw HTTPS request with the kubeconfig's CA and token over one keep-alive agent: for bulk
   * writes (client-node opens a new TLS connection per request) and what client-node hides.
   */
  readonly send: (method: string, path: string, body?: unknown, contentType?: string) => Promise<Response>
  /** Open a raw `?watch=true` stream with the kubeconfig's CA and token (for what client-node hides). */
  readonly rawWatch: (path: string) => Promise<RawWatch>
  /** SIGTERM the server, wait for its exit, and start it again on the same port and data dir. */
  readonly restart: () => Promise<void>
  /** Stop the server and remove its data dir. */
  readonly stop: () => Promise<void>
}

// The suite tests API behaviour, not durability: on Linux the data dir goes to tmpfs, where
// SQLite's per-commit fsync is free (on a disk it costs ~10 ms per write and triples the run time).
const scratch = existsSync("/dev/shm") ? "/dev/shm" : tmpdir()

// The suite pins API semantics (a replace with the resourceVersion just read succeeds; a
// terminating namespace refuses creates): it runs an API-only server, so no controller writes
// status or finishes a deletion under it. test/Controllers.test.ts covers the controllers.
const apiOnly = ["--disable-controllers", "*"]

/** Start an API-only server (`--listen 127.0.0.1:0`, temporary `--data-dir`) and load its kubeconfig. */
export const startCluster = async (): Promise<Cluster> => {
  const dir = await mkdtemp(join(scratch, "fleet-compat-"))
  let server = await start(["--data-dir", dir, "--listen", "127.0.0.1:0", ...apiOnly]).catch(async (e: unknown) => {
    await rm(dir, { recursive: true, force: true })
    throw e
  })
  const kubeconfig = new KubeConfig()
  kubeconfig.loadFromFile(server.kubeconfig)
  const { ca, token } = credentials(server.kubeconfig)
  const http = client(server.port, ca)
  const stopServer = async () => {
    if (server.child.exitCode !== null || server.child.signalCode !== null) return
    server.child.kill("SIGTERM")
    let timer: NodeJS.Timeout | undefined
    const exited = await Promise.race([server.exited, new Promise((r) => (timer = setTimeout(r, 15_000, "timeout")))])
    clearTimeout(timer)
    if (exited === "timeout") server.child.kill("SIGKILL")
  }
  return {
    dir,
    server: () => server,
    kubeconfig,
    core: kubeconfig.makeApiClient(CoreV1Api),
    apps: kubeconfig.makeApiClient(AppsV1Api),
    extensions: kubeconfig.makeApiClient(ApiextensionsV1Api),
    custom: kubeconfig.makeApiClient(CustomObjectsApi),
    send: (method, path, body, contentType = "application/json") =>
      http.send(method, path, { token, ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "content-type": contentType } }) }),
    rawWatch: (path) => rawWatch(server, path),
    restart: async () => {
      const port = server.port
      await stopServer()
      server = await start(["--data-dir", dir, "--listen", `127.0.0.1:${port}`, ...apiOnly])
    },
    stop: async () => {
      http.close()
      await stopServer()
      await rm(dir, { recursive: true, force: true })
    }
  }
}

/** The request options that send a PATCH with the given strategy's content type (client-node 1.x). */
export const patchAs = (strategy: (typeof PatchStrategy)[keyof typeof PatchStrategy]) => setHeaderOptions("Content-Type", strategy)

/** An API failure as client-node reports it: the HTTP code and the Status body the server sent. */
export interface Failure {
  readonly code: number
  readonly status: V1Status & { readonly kind?: string; readonly apiVersion?: string }
}

/**
 * Await a call that must fail with an `ApiException`, and return its code and parsed Status
 * body (client-node 1.x keeps an error body as the raw response text).
 */
export const failure = async (call: Promise<unknown>): Promise<Failure> => {
  let result: unknown
  try {
    result = await call
  } catch (e) {
    if (!(e instanceof ApiException)) throw e
    const body: unknown = typeof e.body === "string" ? JSON.parse(e.body) : e.body
    return { code: e.code, status: body as Failure["status"] }
  }
  throw new Error(`expected the call to fail, but it answered ${JSON.stringify(result)}`)
}

/** One watch event as it came over the wire. */
export interface WatchLine {
  readonly type: string
  readonly object: any
}

/** A raw watch response, read line by line. */
export interface RawWatch {
  readonly status: number
  /** Events received so far, in order. */
  readonly events: Array<WatchLine>
  /** Whether the server ended the response. */
  readonly ended: () => boolean
  /** Stop reading from the socket (a slow client), and read again. */
  readonly pause: () => void
  readonly resume: () => void
  readonly close: () => void
}

const rawWatch = (server: FleetProcess, path: string): Promise<RawWatch> => {
  const { ca, token } = credentials(server.kubeconfig)
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: "127.0.0.1", port: server.port, path, ca, servername: "localhost", headers: { authorization: `Bearer ${token}` } }, (res) => {
      const events: Array<WatchLine> = []
      let ended = false
      let partial = ""
      res.setEncoding("utf8")
      res.on("data", (chunk: string) => {
        const lines = (partial + chunk).split("\n")
        partial = lines.pop()!
        for (const line of lines) if (line !== "") events.push(JSON.parse(line) as WatchLine)
      })
      res.on("end", () => (ended = true))
      res.on("error", () => (ended = true))
      resolve({ status: res.statusCode ?? 0, events, ended: () => ended, pause: () => res.pause(), resume: () => res.resume(), close: () => req.destroy() })
    })
    req.on("error", reject)
    req.end()
  })
}
