/**
 * The kbox wire itself: KboxServer serving core's memory runtime on a real Unix socket, spoken to
 * by kbox-client. What goes in through the client comes out of the port unchanged, and each
 * port error comes back as the same tagged error, so the HTTP layer adds nothing and loses nothing.
 */
import { MemoryRuntime, Runtime } from "@koder/fleet-core"
import { Chunk, Effect, Exit, Layer, Scope, Stream } from "effect"
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { request } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as KboxServer from "../../src/box/KboxServer.js"
import { type Client, connect, eventually } from "./BoxProcess.js"

/** A raw request on the socket, for what the typed client never sends. */
const raw = (socketPath: string, method: string, path: string, body?: string) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request({ socketPath, method, path, headers: { "content-type": "application/json" } }, (res) => {
      let text = ""
      res.on("data", (d: Buffer) => (text += d.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }))
    })
    req.on("error", reject)
    req.end(body)
  })

describe("KboxServer over the memory runtime", () => {
  let dir: string
  let scope: Scope.CloseableScope
  let control: MemoryRuntime.ControlService
  let server: KboxServer.Handle
  let c: Client

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "kbox-wire-"))
    scope = Effect.runSync(Scope.make())
    const context = await Effect.runPromise(
      Layer.buildWithScope(
        MemoryRuntime.layer({
          behavior: (spec) => ({
            output: ["hello", { stream: "stderr", line: "warn" }],
            exec: (req) => ({ exitCode: req.command.length, stdout: req.command.join(" "), stderr: "", timedOut: false }),
            ...(spec.name === "stubborn" ? { ignoreStopSignal: true } : {})
          })
        }),
        scope
      )
    )
    const rt = Effect.runSync(Effect.provide(Runtime.Runtime, context))
    control = Effect.runSync(Effect.provide(MemoryRuntime.Control, context))
    server = await KboxServer.serve(rt, join(dir, "sub", "kbox.sock"))
    c = await connect(server.socketPath)
  })

  afterAll(async () => {
    await c?.close()
    await server?.close()
    await Effect.runPromise(Scope.close(scope, Exit.void))
    rmSync(dir, { recursive: true, force: true })
  })

  it("serves on a 0600 socket, creating its directory", () => {
    expect(statSync(server.socketPath).mode & 0o777).toBe(0o600)
  })

  it("carries sandboxes, containers, exec, logs, stop and images through unchanged", async () => {
    expect((await c.run(c.rt.info)).name).toBe("memory")
    const sb = await c.run(
      c.rt.sandboxes.create({
        podUid: "u1",
        name: "web",
        namespace: "prod",
        network: "host",
        ports: [{ name: "http", containerPort: 8080, hostPort: 31000, protocol: "TCP" }],
        labels: { app: "web" }
      })
    )
    expect(await c.run(c.rt.sandboxes.get(sb.id))).toEqual(sb)
    expect(await c.run(c.rt.sandboxes.list({ labels: { app: "web" } }))).toEqual([sb])
    const spec: Runtime.ContainerSpec = {
      sandboxId: sb.id,
      name: "app",
      attempt: 0,
      command: ["node", "server.js"],
      args: ["--port", "8080"],
      env: { PORT: "8080" },
      workingDir: "/srv",
      user: { uid: 1000, gid: 1000 },
      mounts: [{ hostPath: "/data", containerPath: "/srv/data", readOnly: true }],
      resources: { cpuMillis: 500, memoryBytes: 64 * 1024 * 1024, pids: 100 },
      labels: { [Runtime.Labels.podUid]: "u1", [Runtime.Labels.containerName]: "app" },
      annotations: { note: "x" }
    }
    const id = await c.run(c.rt.containers.create(spec))
    expect((await c.run(c.rt.containers.inspect(id))).spec).toEqual(spec)
    await c.run(c.rt.containers.start(id))
    expect(await c.run(c.rt.containers.exec(id, { command: ["a", "b"], timeoutMs: 1000 }))).toEqual({
      exitCode: 2,
      stdout: "a b",
      stderr: "",
      timedOut: false
    })
    const logs = Chunk.toArray(await c.run(Stream.runCollect(c.rt.containers.logs(id, { timestamps: true }))))
    expect(logs.map(({ stream, line }) => ({ stream, line }))).toEqual([
      { stream: "stdout", line: "hello\n" },
      { stream: "stderr", line: "warn\n" }
    ])
    expect(logs[0]!.timestamp).toBeDefined()
    expect((await c.run(c.rt.containers.list({ labels: { [Runtime.Labels.podUid]: "u1" } }))).map((x) => x.id)).toEqual([id])
    expect((await c.run(c.rt.containers.processes(id)))[0]!.args).toEqual(["node", "server.js", "--port", "8080"])
    expect((await c.run(c.rt.containers.stats(id))).pids).toBe(1)
    await c.run(c.rt.containers.signal(id, "SIGHUP"))
    const stopped = await c.run(c.rt.containers.stop(id, { gracePeriodMs: 1000 }))
    expect(stopped).toMatchObject({ state: "exited", exitCode: 143, signal: "SIGTERM" })
    const image = await c.run(c.rt.images.import({ name: "busybox:1.36", path: "/tmp/busybox.tar" }))
    expect(await c.run(c.rt.images.list)).toEqual([image])
    await c.run(c.rt.containers.remove(id))
    await c.run(c.rt.sandboxes.remove(sb.id))
    expect((await control.calls.pipe(Effect.runPromise)).map((x) => x.op)).toContain("container.signal")
  })

  it("follows logs live over the wire and ends with the container", async () => {
    const sb = await c.run(c.rt.sandboxes.create({ podUid: "u2", name: "f", namespace: "d", network: "host" }))
    const id = await c.run(c.rt.containers.create({ sandboxId: sb.id, name: "f", attempt: 0, command: ["x"] }))
    await c.run(c.rt.containers.start(id))
    await Effect.runPromise(control.write(id, "first"))
    const seen: Array<string> = []
    const followed = Effect.runPromise(
      Stream.runForEach(c.rt.containers.logs(id, { follow: true, tailLines: 1 }), (l) => Effect.sync(() => void seen.push(l.line)))
    )
    // Once the stored line arrived, the follower is subscribed: what is written now is live.
    await eventually(() => seen.length > 0 || undefined, 5_000, "the first line")
    await Effect.runPromise(control.write(id, "later"))
    await Effect.runPromise(control.exit(id, 0))
    await followed
    expect(seen).toEqual(["first\n", "later\n"])
  })

  it("maps every port error to the same tagged error on the client side", async () => {
    expect(await c.fail(c.rt.containers.inspect("missing"))).toMatchObject({ _tag: "RuntimeNotFound", kind: "container", id: "missing" })
    expect(await c.fail(c.rt.sandboxes.get("missing"))).toMatchObject({ _tag: "RuntimeNotFound", kind: "sandbox" })
    const sb = await c.run(c.rt.sandboxes.create({ podUid: "u3", name: "e", namespace: "d", network: "host" }))
    expect(await c.fail(c.rt.sandboxes.create({ podUid: "u3", name: "e", namespace: "d", network: "host" }))).toMatchObject({
      _tag: "RuntimeAlreadyExists",
      id: sb.id
    })
    const id = await c.run(c.rt.containers.create({ sandboxId: sb.id, name: "e", attempt: 0, command: ["x"] }))
    expect((await c.fail(c.rt.containers.exec(id, { command: ["x"] })))._tag).toBe("RuntimeInvalid")
    expect((await c.fail(Stream.runCollect(c.rt.containers.logs("missing"))))._tag).toBe("RuntimeNotFound")
  })

  it("answers malformed requests with 400 and field paths, unknown endpoints with 404, in the error shape", async () => {
    const bad = await raw(server.socketPath, "POST", "/v1/containers", JSON.stringify({ name: 3 }))
    expect(bad.status).toBe(400)
    const body = JSON.parse(bad.text)
    expect(body.error.code).toBe("Invalid")
    expect(body.error.message).toContain("sandboxId")
    expect((await raw(server.socketPath, "POST", "/v1/containers", "{not json")).status).toBe(400)
    const none = await raw(server.socketPath, "GET", "/v1/nothing")
    expect(none.status).toBe(404)
    expect(JSON.parse(none.text).error.code).toBe("NotFound")
    expect((await raw(server.socketPath, "GET", "/v1/containers?state=sleeping")).status).toBe(400)
    expect((await raw(server.socketPath, "GET", "/v1/containers/x/logs?tailLines=-3")).status).toBe(400)
  })

  it("a second server on a live socket is refused; the client reports a missing socket as Unavailable", async () => {
    await expect(KboxServer.serve({} as Runtime.RuntimeService, server.socketPath)).rejects.toThrow(/in use/)
    const lost = await connect(join(dir, "nobody.sock"))
    expect((await lost.fail(lost.rt.info))._tag).toBe("RuntimeUnavailable")
    await lost.close()
  })
})

describe("KboxServer: network-policy", () => {
  const rules: Runtime.NetworkPolicyRules = {
    ingress: { isolated: true, allow: [{ cidrs: ["10.42.0.7/32"], ports: [{ protocol: "TCP", port: 8080 }] }, { cidrs: ["172.17.0.0/16"], except: ["172.17.1.0/24"] }] },
    egress: { isolated: false, allow: [] }
  }

  const serveMemory = async (networkPolicy: boolean) => {
    const dir = mkdtempSync(join(tmpdir(), "kbox-policy-"))
    const scope = Effect.runSync(Scope.make())
    const context = await Effect.runPromise(
      Layer.buildWithScope(MemoryRuntime.layer({ info: { ...MemoryRuntime.defaultInfo, capabilities: { ...MemoryRuntime.defaultInfo.capabilities, networkPolicy } } }), scope)
    )
    const server = await KboxServer.serve(Effect.runSync(Effect.provide(Runtime.Runtime, context)), join(dir, "kbox.sock"))
    const c = await connect(server.socketPath)
    const close = async () => {
      await c.close()
      await server.close()
      await Effect.runPromise(Scope.close(scope, Exit.void))
      rmSync(dir, { recursive: true, force: true })
    }
    return { c, server, close, control: Effect.runSync(Effect.provide(MemoryRuntime.Control, context)) }
  }

  const container = async (c: Client) => {
    const sb = await c.run(c.rt.sandboxes.create({ podUid: "p", name: "p", namespace: "d", network: "host" }))
    return { sb, id: await c.run(c.rt.containers.create({ sandboxId: sb.id, name: "c", attempt: 0, command: ["x"] })) }
  }

  it("carries the rules to a runtime that enforces them and answers how many", async () => {
    const m = await serveMemory(true)
    try {
      const { sb, id } = await container(m.c)
      expect(await m.c.run(m.c.rt.containers.applyNetworkPolicy(id, rules))).toEqual({ rules: 2 })
      expect((await Effect.runPromise(m.control.networkPolicies)).get(sb.id)).toEqual(rules)
      expect(await m.c.fail(m.c.rt.containers.applyNetworkPolicy("missing", rules))).toMatchObject({ _tag: "RuntimeNotFound" })
      const bad = await raw(m.server.socketPath, "POST", `/v1/containers/${id}/network-policy`, JSON.stringify({ ingress: { isolated: "yes" } }))
      expect(bad.status).toBe(400)
    } finally {
      await m.close()
    }
  })

  it("answers 501 Unsupported where the runtime cannot enforce them", async () => {
    const m = await serveMemory(false)
    try {
      const { id } = await container(m.c)
      expect(await m.c.fail(m.c.rt.containers.applyNetworkPolicy(id, rules))).toMatchObject({ _tag: "RuntimeUnsupported" })
      const answer = await raw(m.server.socketPath, "POST", `/v1/containers/${id}/network-policy`, JSON.stringify(rules))
      expect(answer.status).toBe(501)
      expect(JSON.parse(answer.text).error.code).toBe("Unsupported")
    } finally {
      await m.close()
    }
  })
})
