/**
 * `pods/log`, `pods/exec` and `pods/signal` through the test cluster's API, answered from a
 * memory runtime holding the pod's containers (as the agent labels them): logs with tail,
 * timestamps and previous; exec refused without a ProcessControl consent (403 naming it), then
 * run with its output and exit code; signals checked against the consent's list; the admission
 * chain sees a CONNECT and can refuse it; each action leaves an audit Event on the pod.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as AdmissionApi from "../../src/api/Admission.js"
import * as ApiError from "../../src/api/ApiError.js"
import * as Authz from "../../src/api/Authz.js"
import * as NodeAccess from "../../src/api/NodeAccess.js"
import * as PodExec from "../../src/api/PodExec.js"
import * as PodLog from "../../src/api/PodLog.js"
import * as Router from "../../src/api/Router.js"
import * as Status from "../../src/model/Status.js"
import * as MemoryRuntime from "../../src/runtime/MemoryRuntime.js"
import * as Runtime from "../../src/runtime/Runtime.js"
import * as TestCluster from "../../src/testing/TestCluster.js"

type Json = Record<string, any>

const ns = "default"

// Refuses any exec of "rm": the admission chain must see exec requests.
const noRm: AdmissionApi.Plugin = {
  name: "NoRm",
  validate: (request) =>
    request.operation === "CONNECT" && request.subresource === "exec" && (request.object["command"] as Array<string>)[0] === "rm"
      ? Effect.fail(ApiError.of(Status.forbidden({ group: "", resource: "pods/exec" }, request.name, "rm is not allowed here")))
      : Effect.succeed([])
}

const setup = Effect.gen(function* () {
  const { runtime, control } = yield* MemoryRuntime.make({
    behavior: () => ({
      output: ["one\n", "two\n", { stream: "stderr", line: "three\n" }],
      exec: (request) => ({ exitCode: request.command[0] === "false" ? 1 : 0, stdout: `ran ${request.command.join(" ")}\n`, stderr: "", timedOut: false })
    })
  })
  const access = NodeAccess.routed(new Map([["node-0", NodeAccess.fromRuntime(runtime, "node-0")]]))
  const cluster = yield* TestCluster.make({
    nodes: 1,
    scheduler: false,
    admission: [noRm],
    subresources: [PodLog.handler(() => access), PodExec.execHandler(() => access), PodExec.signalHandler(() => access)]
  })
  const pod = (yield* cluster.client.create({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "web", namespace: ns, labels: { app: "web" } },
    spec: { nodeName: "node-0", containers: [{ name: "app", image: "app:1" }, { name: "sidecar", image: "side:1" }] }
  })) as Json
  const uid = pod["metadata"]["uid"] as string
  // What the agent would have made: a sandbox and a container per run.
  const sandbox = yield* runtime.sandboxes.create({ podUid: uid, name: "web", namespace: ns, network: "host" })
  const run = (name: string, attempt: number) =>
    Effect.gen(function* () {
      const id = yield* runtime.containers.create({
        sandboxId: sandbox.id,
        name,
        attempt,
        command: ["app"],
        labels: { [Runtime.Labels.podUid]: uid, [Runtime.Labels.containerName]: name, [Runtime.Labels.restartAttempt]: String(attempt) }
      })
      yield* runtime.containers.start(id)
      return id
    })
  const first = yield* run("app", 0)
  yield* control.exit(first, 1)
  const current = yield* run("app", 1)
  yield* run("sidecar", 0)
  const call = (path: string, init: { method?: string; body?: unknown } = {}) =>
    Effect.promise(async () => {
      const response = await cluster.fetch(`http://fleet.test/api/v1/namespaces/${ns}/pods/web/${path}`, {
        method: init.method ?? "GET",
        headers: { authorization: `Bearer ${cluster.adminToken}`, "content-type": "application/json" },
        ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) })
      })
      const text = await response.text()
      return { code: response.status, text, json: () => JSON.parse(text) as Json }
    })
  const events = (reason: string) =>
    Effect.map(cluster.client.list({ apiVersion: "v1", kind: "Event" }, { namespace: ns }), (l) =>
      (l.items as Array<Json>).filter((e) => e["reason"] === reason && e["involvedObject"]["name"] === "web")
    )
  const consent = (spec: Json) =>
    cluster.client.create({ apiVersion: "fleet.koder.dev/v1", kind: "ProcessControl", metadata: { name: `consent-${Object.keys(spec).join("-").toLowerCase() || "all"}`, namespace: ns }, spec })
  return { cluster, runtime, control, call, events, consent, current }
})

describe("pods/log", () => {
  it.scopedLive("streams a container's output, with tailLines, timestamps and the previous run", () =>
    Effect.gen(function* () {
      const { call } = yield* setup
      const all = yield* call("log?container=app")
      expect(all.code).toBe(200)
      expect(all.text).toBe("one\ntwo\nthree\n")
      expect((yield* call("log?container=app&tailLines=1")).text).toBe("three\n")
      const stamped = (yield* call("log?container=app&timestamps=true")).text.split("\n")[0]!
      expect(stamped).toMatch(/^\d{4}-\d\d-\d\dT\S+ one$/)
      expect((yield* call("log?container=app&previous=true")).code).toBe(200)
      expect((yield* call("log?container=sidecar&previous=true")).json()).toMatchObject({
        code: 400,
        message: `previous terminated container "sidecar" in pod "web" not found`
      })
      expect((yield* call("log")).json()).toMatchObject({ code: 400, message: "a container name must be specified for pod web, choose one of: [app sidecar]" })
      expect((yield* call("log?container=nope")).json()).toMatchObject({ code: 400, message: "container nope is not valid for pod web" })
      expect((yield* call("log?container=app&tailLines=-1")).json()).toMatchObject({ code: 422, message: expect.stringContaining("tailLines") })
    })
  )

  it.scopedLive("follows live output until the client stops reading", () =>
    Effect.gen(function* () {
      const { cluster, control, current } = yield* setup
      const response = yield* Effect.promise(() =>
        cluster.fetch(`http://fleet.test/api/v1/namespaces/${ns}/pods/web/log?container=app&follow=true&tailLines=0`, { headers: { authorization: `Bearer ${cluster.adminToken}` } })
      )
      expect(response.status).toBe(200)
      const reader = response.body!.getReader()
      yield* control.write(current, "live line\n")
      const first = yield* Effect.promise(() => reader.read())
      expect(new TextDecoder().decode(first.value)).toBe("live line\n")
      yield* Effect.promise(() => reader.cancel())
    })
  )
})

describe("pods/exec and pods/signal", () => {
  it.scopedLive("exec needs a ProcessControl consent, passes admission, returns output and exit code, and leaves an audit Event", () =>
    Effect.gen(function* () {
      const { call, events, consent } = yield* setup
      const refused = yield* call("exec", { method: "POST", body: { container: "app", command: ["ls", "-l"] } })
      expect(refused.code).toBe(403)
      expect(refused.json()["message"]).toBe(`pods/exec "web" is forbidden: no ProcessControl in namespace "default" consents to exec into this pod (create one to allow it)`)

      yield* consent({ podSelector: { matchLabels: { app: "web" } }, signal: false })
      const ran = yield* call("exec", { method: "POST", body: { container: "app", command: ["ls", "-l"] } })
      expect(ran.code).toBe(200)
      expect(ran.json()).toMatchObject({ kind: "PodExecResult", container: "app", exitCode: 0, stdout: "ran ls -l\n", timedOut: false })
      const failed = yield* call("exec?container=app&command=false", { method: "POST" })
      expect(failed.json()).toMatchObject({ exitCode: 1 })

      const denied = yield* call("exec", { method: "POST", body: { container: "app", command: ["rm", "-rf", "/data"] } })
      expect(denied.code).toBe(403)
      expect(denied.json()["message"]).toContain("rm is not allowed here")

      expect((yield* call("exec", { method: "POST", body: { container: "app", command: [] } })).code).toBe(422)
      expect((yield* call("exec", { method: "GET" })).code).toBe(405)

      const audit = yield* events("Exec")
      expect(audit.map((e) => e["message"]).sort()).toEqual([
        `fleet:test-admin ran "false" with 0 argument(s) in container "app": exit code 1`,
        `fleet:test-admin ran "ls" with 1 argument(s) in container "app": exit code 0`
      ])
      // The arguments themselves (secrets, often) are not in the event.
      expect(JSON.stringify(audit)).not.toContain("-l")
    })
  )

  it.scopedLive("signal follows the consent's list of signals and reaches the running container", () =>
    Effect.gen(function* () {
      const { call, consent, events, control, current } = yield* setup
      expect((yield* call("signal", { method: "POST", body: { container: "app", signal: "SIGHUP" } })).code).toBe(403)
      yield* consent({ exec: false, signals: ["SIGHUP"] })
      const sent = yield* call("signal", { method: "POST", body: { container: "app", signal: "SIGHUP" } })
      expect(sent.code).toBe(200)
      expect(sent.json()).toMatchObject({ kind: "Status", status: "Success" })
      const term = yield* call("signal", { method: "POST", body: { container: "app", signal: "SIGTERM" } })
      expect(term.code).toBe(403)
      expect(term.json()["message"]).toContain("consents to send SIGTERM to this pod")
      expect((yield* call("signal", { method: "POST", body: { container: "app", signal: "SIGBOGUS" } })).code).toBe(422)
      // This consent says nothing about exec.
      expect((yield* call("exec", { method: "POST", body: { container: "app", command: ["ls"] } })).code).toBe(403)
      const calls = yield* control.calls
      expect(calls.filter((c) => c.op === "container.signal").map((c) => [c.id, c.detail])).toEqual([[current, "SIGHUP"]])
      expect((yield* events("Signal")).map((e) => e["message"])).toEqual([`fleet:test-admin sent SIGHUP to container "app"`])
    })
  )
})

describe("authorization of process control", () => {
  const attributesOf = (method: string, path: string) =>
    Authz.attributes(Router.route(path), {
      method,
      path,
      query: new URLSearchParams(),
      headers: {},
      body: undefined,
      user: { name: "u", uid: "u", groups: [] },
      client: "c"
    })
  it("asks RBAC for the exec and signal verbs, and get for logs", () => {
    expect(attributesOf("POST", "/api/v1/namespaces/d/pods/p/exec")).toMatchObject({ verb: "exec", resource: "pods", subresource: "exec" })
    expect(attributesOf("POST", "/api/v1/namespaces/d/pods/p/signal")).toMatchObject({ verb: "signal", resource: "pods", subresource: "signal" })
    expect(attributesOf("GET", "/api/v1/namespaces/d/pods/p/log")).toMatchObject({ verb: "get", subresource: "log" })
    expect(attributesOf("POST", "/api/v1/namespaces/d/pods/p/eviction")).toMatchObject({ verb: "create" })
  })
})
