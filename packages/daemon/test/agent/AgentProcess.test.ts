// The agent end to end on this host: a real box (supervised processes on a real Unix socket),
// the kbox client, the network prober, the filesystem volume writer and host ports, against an
// in-process API server. Workloads are small Node.js HTTP servers listening on $PORT.
import { Pods } from "@koder/fleet-core"
import { TestCluster } from "@koder/fleet-core/testing"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { mkdtempSync, readFileSync, readlinkSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as AgentProcess from "../../src/agent/AgentProcess.js"
import * as Box from "../../src/box/Box.js"

type Json = Record<string, any>

const PodRef = { apiVersion: "v1", kind: "Pod" } as const
const ConfigMapRef = { apiVersion: "v1", kind: "ConfigMap" } as const

// Answers `<name> <greeting file>` on /, 200 on /healthz unless $SICK is set.
const server = `
const http = require("http"), fs = require("fs")
http.createServer((q, s) => {
  if (q.url === "/healthz") { s.statusCode = process.env.SICK ? 500 : 200; return s.end() }
  const f = process.env.FLEET_VOLUME_GREETING
  s.end(process.env.HOSTNAME + " " + (f ? fs.readFileSync(f + "/text", "utf8") : "-"))
}).listen(Number(process.env.PORT), "127.0.0.1")
`

const pod = (name: string, container: Json = {}, spec: Json = {}): Json => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default" },
  spec: {
    terminationGracePeriodSeconds: 5,
    containers: [
      {
        name: "web",
        image: "node:20",
        command: [process.execPath, "-e", server],
        ports: [{ name: "http", containerPort: 8080 }],
        readinessProbe: { httpGet: { path: "/healthz", port: "http" }, periodSeconds: 1 },
        ...container
      }
    ],
    ...spec
  }
})

const alive = (pid: number) => {
  try {
    return !/\) [ZX] /.test(readFileSync(`/proc/${pid}/stat`, "utf8"))
  } catch {
    return false
  }
}

const setup = Effect.gen(function* () {
  const dir = mkdtempSync(join(tmpdir(), "fleet-agent-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  const box = yield* Effect.acquireRelease(
    Effect.promise(() =>
      Box.start({ socketPath: join(dir, "box.sock"), dataDir: join(dir, "box"), driver: "process", isolation: "none", cgroups: "none", logMaxBytes: 1 << 20, logMaxFiles: 1 })
    ),
    (b) =>
      // Leave no process behind: stop every container, then the box.
      Effect.promise(async () => {
        const list = await Effect.runPromise(b.runtime.containers.list())
        await Promise.all(list.map((c) => Effect.runPromise(Effect.ignore(b.runtime.containers.remove(c.id)))))
        await b.close()
      })
  )
  const cluster = yield* TestCluster.make({ nodes: [] })
  const startAgent = Effect.gen(function* () {
    const scope = yield* Scope.make()
    const running = yield* AgentProcess.run({
      server: "http://fleet.test",
      token: cluster.adminToken,
      fetch: cluster.fetch,
      boxSocket: box.socketPath,
      nodeName: "host-0",
      dataDir: join(dir, "agent"),
      internalIP: "127.0.0.1",
      reserved: { cpu: "100m" },
      tuning: { relistMs: 100, resyncMs: 500, leaseRenewMs: 500, objectTtlMs: 0 }
    }).pipe(Scope.extend(scope), Effect.orDie)
    yield* running.agent.synced
    return { running, scope }
  })
  return { dir, box, cluster, startAgent }
})

const get = (cluster: TestCluster.TestCluster, name: string) => Effect.map(cluster.client.get(PodRef, "default", name), (p) => p as Json)

const until = <A>(cluster: TestCluster.TestCluster, name: string, check: (p: Json) => A | undefined | false, timeoutMs = 15_000) =>
  cluster.eventually(
    Effect.flatMap(get(cluster, name), (p) => {
      const a = check(p)
      return a === undefined || a === false ? Effect.fail(new Error(`${name}: ${JSON.stringify(p["status"])}`)) : Effect.succeed(a)
    }),
    { timeoutMs }
  )

const portOf = (box: Box.Box, podName: string) =>
  Effect.map(box.runtime.containers.list({ labels: { "fleet.koder.dev/pod-name": podName }, state: "running" }), (list) => Number(list[0]?.spec.env?.["PORT"]))

const pidOf = (box: Box.Box, podName: string) =>
  Effect.map(box.runtime.containers.list({ labels: { "fleet.koder.dev/pod-name": podName }, state: "running" }), (list) => list[0]?.status.pid)

const httpGet = (port: number, path = "/") => Effect.promise(() => fetch(`http://127.0.0.1:${port}${path}`).then(async (r) => ({ status: r.status, body: await r.text() })))

describe("AgentProcess on this host", () => {
  it.live(
    "runs a pod as a real process on its host port, restarts it when killed from outside, and leaves nothing when deleted",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { box, cluster, startAgent } = yield* setup
          yield* startAgent
          const node = (yield* cluster.eventually(cluster.client.get({ apiVersion: "v1", kind: "Node" }, undefined, "host-0"))) as Json
          expect(node.metadata.labels["kubernetes.io/hostname"]).toBe("host-0")
          yield* cluster.client.create(pod("hello"))
          const ready = yield* until(cluster, "hello", (p) => Pods.isReady(p) && p)
          expect(ready.spec.nodeName).toBe("host-0")
          expect(ready.status.podIP).toBe("127.0.0.1")
          const port = yield* portOf(box, "hello")
          expect(port).toBeGreaterThan(0)
          expect(yield* httpGet(port)).toEqual({ status: 200, body: "hello -" })

          const pid = (yield* pidOf(box, "hello"))!
          process.kill(pid, "SIGKILL")
          const restarted = yield* until(cluster, "hello", (p) => p.status.containerStatuses?.[0]?.restartCount === 1 && Pods.isReady(p) && p)
          expect(restarted.status.containerStatuses[0].lastState.terminated).toMatchObject({ exitCode: 137 })
          expect(yield* portOf(box, "hello")).toBe(port)
          expect((yield* httpGet(port)).status).toBe(200)

          const newPid = (yield* pidOf(box, "hello"))!
          yield* cluster.client.delete(PodRef, "default", "hello")
          yield* cluster.eventually(Effect.flatMap(TestCluster.find(cluster, PodRef, "default", "hello"), (p) => (p === undefined ? Effect.void : Effect.fail(new Error("still there")))))
          expect(alive(newPid)).toBe(false)
          yield* cluster.eventually(Effect.flatMap(box.runtime.containers.list(), (l) => (l.length === 0 ? Effect.void : Effect.fail(new Error("containers left")))))
        })
      ),
    60_000
  )

  it.live(
    "a failing HTTP liveness probe restarts the container",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { cluster, startAgent } = yield* setup
          yield* startAgent
          yield* cluster.client.create(
            pod("sick", {
              env: [{ name: "SICK", value: "1" }],
              readinessProbe: undefined,
              livenessProbe: { httpGet: { path: "/healthz", port: 8080 }, initialDelaySeconds: 1, periodSeconds: 1, failureThreshold: 1 }
            }, { terminationGracePeriodSeconds: 2 })
          )
          const p = yield* until(cluster, "sick", (p) => (p.status?.containerStatuses?.[0]?.restartCount ?? 0) >= 1 && p, 20_000)
          expect(p.status.containerStatuses[0].lastState.terminated).toBeDefined()
        })
      ),
    60_000
  )

  it.live(
    "projects a ConfigMap as files on disk and updates them in place",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { box, cluster, startAgent } = yield* setup
          yield* startAgent
          yield* cluster.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "greeting", namespace: "default" }, data: { text: "bonjour" } })
          yield* cluster.client.create({
            ...pod("greeter", { volumeMounts: [{ name: "greeting", mountPath: "/etc/greeting" }] }),
            spec: { ...pod("greeter").spec, volumes: [{ name: "greeting", configMap: { name: "greeting" } }], containers: [{ ...pod("greeter").spec.containers[0], volumeMounts: [{ name: "greeting", mountPath: "/etc/greeting" }] }] }
          })
          yield* until(cluster, "greeter", (p) => Pods.isReady(p))
          const port = yield* portOf(box, "greeter")
          expect((yield* httpGet(port)).body).toBe("greeter bonjour")
          const [c] = yield* box.runtime.containers.list({ labels: { "fleet.koder.dev/pod-name": "greeter" } })
          const dir = c!.spec.env!["FLEET_VOLUME_GREETING"]!
          expect(readlinkSync(join(dir, "text"))).toBe("..data/text")
          yield* cluster.client.patch(ConfigMapRef, "default", "greeting", "merge", { data: { text: "hola" } })
          yield* cluster.eventually(Effect.flatMap(httpGet(port), (r) => (r.body === "greeter hola" ? Effect.void : Effect.fail(new Error(r.body)))), { timeoutMs: 10_000 })
        })
      ),
    60_000
  )

  it.live(
    "a restarted agent re-adopts the running process: same pid, no restart",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { box, cluster, startAgent } = yield* setup
          const first = yield* startAgent
          yield* cluster.client.create(pod("steady"))
          yield* until(cluster, "steady", (p) => Pods.isReady(p))
          const pid = yield* pidOf(box, "steady")
          yield* Scope.close(first.scope, Exit.void)
          const second = yield* startAgent
          yield* Effect.sleep(1_500)
          expect(yield* pidOf(box, "steady")).toBe(pid)
          const p = yield* get(cluster, "steady")
          expect(p.status.containerStatuses[0].restartCount).toBe(0)
          expect(Pods.isReady(p)).toBe(true)
          expect(second.running.agent.metrics().failures).toBe(0)
        })
      ),
    60_000
  )
})
