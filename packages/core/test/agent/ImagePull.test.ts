import { Effect, TestClock } from "effect"
import { describe, expect, it } from "@effect/vitest"
import * as ContainerActions from "../../src/agent/ContainerActions.js"
import * as ImagePull from "../../src/agent/ImagePull.js"
import * as PodStates from "../../src/agent/PodStates.js"
import type * as PodSync from "../../src/agent/PodSync.js"
import * as RuntimeCapabilities from "../../src/agent/RuntimeCapabilities.js"
import type * as VolumePlan from "../../src/agent/VolumePlan.js"
import type * as Config from "../../src/model/Config.js"
import type * as Pod from "../../src/model/Pod.js"
import * as MemoryRuntime from "../../src/runtime/MemoryRuntime.js"

const b64 = (s: string) => Buffer.from(s).toString("base64")
const dockerSecret = (auths: Record<string, unknown>, type: "json" | "cfg" = "json"): Config.Secret => ({
  apiVersion: "v1",
  kind: "Secret",
  metadata: { name: "pull" },
  type: type === "json" ? "kubernetes.io/dockerconfigjson" : "kubernetes.io/dockercfg",
  data: type === "json" ? { ".dockerconfigjson": b64(JSON.stringify({ auths })) } : { ".dockercfg": b64(JSON.stringify(auths)) }
})

describe("ImagePull policy", () => {
  it.each([
    ["busybox", "Always"],
    ["busybox:latest", "Always"],
    ["busybox:1.36", "IfNotPresent"],
    ["127.0.0.1:5000/busybox", "Always"],
    ["127.0.0.1:5000/busybox:1", "IfNotPresent"],
    [`busybox@sha256:${"a".repeat(64)}`, "IfNotPresent"],
    [`busybox:latest@sha256:${"a".repeat(64)}`, "IfNotPresent"]
  ] as const)("defaultPolicy(%s) = %s", (image, policy) => {
    expect(ImagePull.defaultPolicy(image)).toBe(policy)
  })

  it("a container's own policy wins", () => {
    expect(ImagePull.policyOf({ name: "c", image: "busybox", imagePullPolicy: "Never" })).toBe("Never")
    expect(ImagePull.policyOf({ name: "c", image: "busybox:1" })).toBe("IfNotPresent")
  })
})

describe("ImagePull locations", () => {
  it.each([
    ["busybox", "docker.io", "library/busybox"],
    ["busybox:1.36", "docker.io", "library/busybox"],
    ["bitnami/redis:7", "docker.io", "bitnami/redis"],
    ["ghcr.io/koder/fleet:v1", "ghcr.io", "koder/fleet"],
    ["127.0.0.1:5000/busybox:1", "127.0.0.1:5000", "busybox"],
    ["localhost/team/app", "localhost", "team/app"],
    [`registry.example.com/a/b@sha256:${"b".repeat(64)}`, "registry.example.com", "a/b"]
  ])("locationOf(%s) = %s %s", (image, host, path) => {
    expect(ImagePull.locationOf(image)).toEqual({ host, path })
  })
})

describe("ImagePull credentials", () => {
  const alice = { username: "alice", password: "a" }
  const bob = { username: "bob", password: "b" }
  it.each<[string, string, Record<string, unknown>, ReadonlyArray<string>]>([
    ["Docker Hub's legacy key matches a library image", "busybox", { "https://index.docker.io/v1/": alice }, ["alice"]],
    ["a host key with a port", "127.0.0.1:5000/app:1", { "127.0.0.1:5000": alice }, ["alice"]],
    ["an https URL key", "reg.example.com/app", { "https://reg.example.com": alice }, ["alice"]],
    ["another host does not match", "reg.example.com/app", { "other.example.com": alice }, []],
    ["a path key matches only its repositories", "reg.example.com/team/app", { "reg.example.com/team": alice, "reg.example.com/other": bob }, ["alice"]],
    ["a path is a prefix at a segment boundary", "reg.example.com/teamx/app", { "reg.example.com/team": alice }, []],
    ["the most specific key first", "reg.example.com/team/app", { "reg.example.com": bob, "reg.example.com/team": alice }, ["alice", "bob"]],
    ["a wildcard matches one label", "eu.reg.example.com/app", { "*.reg.example.com": alice }, ["alice"]],
    ["a wildcard does not match two labels", "a.eu.reg.example.com/app", { "*.reg.example.com": alice }, []],
    ["an auth field is decoded", "reg.example.com/app", { "reg.example.com": { auth: b64("carol:p:w") } }, ["carol"]]
  ])("%s", (_why, image, auths, users) => {
    expect(ImagePull.credentialsFor(image, [dockerSecret(auths)]).map((c) => c.username)).toEqual(users)
  })

  it("reads legacy dockercfg secrets, and ignores malformed ones", () => {
    expect(ImagePull.credentialsFor("reg.example.com/app", [dockerSecret({ "reg.example.com": alice }, "cfg")])).toEqual([alice])
    const broken: Config.Secret = { apiVersion: "v1", kind: "Secret", metadata: { name: "x" }, data: { ".dockerconfigjson": b64("{not json") } }
    expect(ImagePull.credentialsFor("reg.example.com/app", [broken])).toEqual([])
  })

  it("the password of an auth may contain colons; the password field of a token entry is kept", () => {
    expect(ImagePull.credentialsFor("r.io/a", [dockerSecret({ "r.io": { auth: b64("u:p:q") } })])).toEqual([{ username: "u", password: "p:q" }])
    expect(ImagePull.credentialsFor("r.io/a", [dockerSecret({ "r.io": { identitytoken: "tok" } })])).toEqual([{ identityToken: "tok" }])
  })
})

describe("ImagePull backoff", () => {
  it.each([
    [1, 10_000],
    [2, 20_000],
    [3, 40_000],
    [5, 160_000],
    [6, 300_000],
    [20, 300_000]
  ])("after %i failures: %i ms", (failures, ms) => {
    expect(ImagePull.backoffDelayMs(failures)).toBe(ms)
  })
})

// ---------------------------------------------------------------------------------------------
// Through ContainerActions.start, against the memory runtime's simulated registry.
// ---------------------------------------------------------------------------------------------

const container = (o: Partial<Pod.Container> = {}): Pod.Container => ({ name: "app", image: "reg.test/busybox:1", ...o })
const pod = (c: Pod.Container, pullSecrets: ReadonlyArray<string> = []): Pod.Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "web", namespace: "default", uid: "u1" },
  spec: { containers: [c], ...(pullSecrets.length > 0 ? { imagePullSecrets: pullSecrets.map((name) => ({ name })) } : {}) }
})
const plan: VolumePlan.Plan = { sources: [], mounts: new Map() }
const lookupWith = (secrets: Record<string, Config.Secret> = {}): VolumePlan.Lookup => ({
  configMap: () => undefined,
  secret: (n) => secrets[n],
  claim: () => undefined,
  volume: () => undefined,
  token: () => undefined
})
const startAction = (c: Pod.Container, attempt = 0): Extract<PodSync.Action, { _tag: "Start" }> => ({ _tag: "Start", container: c, init: false, attempt })

const registry: Record<string, MemoryRuntime.RegistryImage> = {
  "reg.test/busybox:1": { config: { entrypoint: ["/bin/sh", "-c"], cmd: ["echo hi"], env: ["PATH=/usr/sbin:/bin", "MODE=image"], workingDir: "/srv", user: "1000:1000" } },
  "reg.test/private:1": { config: { cmd: ["/app"] }, username: "alice", password: "s3cret" },
  "reg.test/down:1": { unreachable: true }
}

const world = (imagePull = true) =>
  Effect.gen(function* () {
    const { runtime, control } = yield* MemoryRuntime.make({
      registry,
      info: { ...MemoryRuntime.defaultInfo, capabilities: { ...MemoryRuntime.defaultInfo.capabilities, isolation: imagePull ? "oci" : "none", runAsUser: true, imagePull } }
    })
    const events: Array<string> = []
    const deps: ContainerActions.Deps = {
      runtime,
      policy: { beforeStart: () => Effect.succeed({ run: true }), metrics: () => ({ applied: 0, failures: 0 }) },
      capabilities: RuntimeCapabilities.make(runtime),
      emit: (_pod, type, reason, message) => Effect.sync(() => void events.push(`${type} ${reason}: ${message}`)),
      run: () => Effect.succeed({ result: "success", message: "" }),
      specContext: (state, capabilities) => ({ hostIP: "10.0.0.1", podIP: "10.0.0.1", nodeAllocatable: {}, defaultEnv: { PATH: "/host/bin" }, network: "host", sandboxId: state.sandbox?.id ?? "", hostPorts: [], capabilities })
    }
    const sandbox = yield* runtime.sandboxes.create({ podUid: "u1", name: "web", namespace: "default", hostname: "web", network: "host", ports: [], labels: {} })
    const state = PodStates.stateOf(new Map(), "u1")
    state.sandbox = sandbox
    const pulls = Effect.map(control.calls, (calls) => calls.filter((c) => c.op === "image.pull").length)
    return { deps, runtime, events, state, pulls }
  })

describe("ImagePull through a container start", () => {
  it.scoped("pulls, says so, and runs the image's entrypoint and cmd with its env, working dir and user", () =>
    Effect.gen(function* () {
      const { deps, runtime, events, state } = yield* world()
      const c = container()
      expect(yield* ContainerActions.start(deps, pod(c), state, startAction(c), lookupWith(), plan)).toBe(true)
      expect(events[0]).toBe('Normal Pulling: Pulling image "reg.test/busybox:1"')
      expect(events[1]).toMatch(/^Normal Pulled: Successfully pulled image "reg.test\/busybox:1" in /)
      const spec = (yield* runtime.containers.list())[0]!.spec
      expect(spec.command).toEqual(["/bin/sh", "-c"])
      expect(spec.args).toEqual(["echo hi"])
      expect(spec.env?.["PATH"]).toBe("/usr/sbin:/bin")
      expect(spec.env?.["MODE"]).toBe("image")
      expect(spec.workingDir).toBe("/srv")
      expect(spec.user).toEqual({ uid: 1000, gid: 1000 })
    })
  )

  it.scoped("the container's command, args, env, workingDir and runAsUser win over the image's", () =>
    Effect.gen(function* () {
      const { deps, runtime, state } = yield* world()
      const c = container({ args: ["echo mine"], env: [{ name: "MODE", value: "pod" }], workingDir: "/w", securityContext: { runAsUser: 2000 } })
      expect(yield* ContainerActions.start(deps, pod(c), state, startAction(c), lookupWith(), plan)).toBe(true)
      const spec = (yield* runtime.containers.list())[0]!.spec
      expect([spec.command, spec.args]).toEqual([["/bin/sh", "-c"], ["echo mine"]])
      expect(spec.env?.["MODE"]).toBe("pod")
      expect(spec.workingDir).toBe("/w")
      expect(spec.user?.uid).toBe(2000)
    })
  )

  it.scoped("IfNotPresent uses the held image on the next attempt; Always asks the registry again", () =>
    Effect.gen(function* () {
      const { deps, events, state, pulls } = yield* world()
      const c = container()
      yield* ContainerActions.start(deps, pod(c), state, startAction(c), lookupWith(), plan)
      yield* ContainerActions.start(deps, pod(c), state, startAction(c, 1), lookupWith(), plan)
      expect(yield* pulls).toBe(1)
      expect(events).toContain('Normal Pulled: Container image "reg.test/busybox:1" already present on machine')
      const always = container({ imagePullPolicy: "Always" })
      yield* ContainerActions.start(deps, pod(always), state, startAction(always, 2), lookupWith(), plan)
      expect(yield* pulls).toBe(2)
    })
  )

  it.scoped("Never: an absent image waits with ErrImageNeverPull and is never fetched", () =>
    Effect.gen(function* () {
      const { deps, events, state, pulls } = yield* world()
      const c = container({ imagePullPolicy: "Never" })
      expect(yield* ContainerActions.start(deps, pod(c), state, startAction(c), lookupWith(), plan)).toBe(false)
      expect(state.waiting.get("app")).toEqual({ reason: "ErrImageNeverPull", message: 'Container image "reg.test/busybox:1" is not present with pull policy of Never' })
      expect(events).toEqual(['Warning ErrImageNeverPull: Container image "reg.test/busybox:1" is not present with pull policy of Never'])
      expect(yield* pulls).toBe(0)
    })
  )

  it.scoped("a failed pull waits ErrImagePull, then ImagePullBackOff until the backoff passes, doubling", () =>
    Effect.gen(function* () {
      const { deps, events, state, pulls } = yield* world()
      const c = container({ image: "reg.test/missing:1" })
      const p = pod(c)
      expect(yield* ContainerActions.start(deps, p, state, startAction(c), lookupWith(), plan)).toBe(false)
      expect(state.waiting.get("app")?.reason).toBe("ErrImagePull")
      expect(events).toContain('Warning Failed: Failed to pull image "reg.test/missing:1": reg.test/missing:1: manifest unknown')
      expect(events).toContain("Warning Failed: Error: ErrImagePull")
      yield* TestClock.adjust("5 seconds")
      yield* ContainerActions.start(deps, p, state, startAction(c), lookupWith(), plan)
      expect(state.waiting.get("app")?.reason).toBe("ImagePullBackOff")
      expect(events).toContain('Normal BackOff: Back-off pulling image "reg.test/missing:1"')
      expect(yield* pulls).toBe(1)
      yield* TestClock.adjust("6 seconds") // 11 s: past the first 10 s
      yield* ContainerActions.start(deps, p, state, startAction(c), lookupWith(), plan)
      expect(yield* pulls).toBe(2)
      expect(state.imagePulls.get("app")?.failures).toBe(2)
      yield* TestClock.adjust("15 seconds") // the second backoff is 20 s
      yield* ContainerActions.start(deps, p, state, startAction(c), lookupWith(), plan)
      expect(yield* pulls).toBe(2)
    })
  )

  it.scoped("a changed image is pulled at once, whatever the backoff of the old one", () =>
    Effect.gen(function* () {
      const { deps, state, pulls } = yield* world()
      const bad = container({ image: "reg.test/missing:1" })
      yield* ContainerActions.start(deps, pod(bad), state, startAction(bad), lookupWith(), plan)
      const good = container()
      expect(yield* ContainerActions.start(deps, pod(good), state, startAction(good), lookupWith(), plan)).toBe(true)
      expect(yield* pulls).toBe(2)
      expect(state.imagePulls.size).toBe(0)
    })
  )

  it.scoped("a private image needs its pull secret", () =>
    Effect.gen(function* () {
      const { deps, state } = yield* world()
      const c = container({ image: "reg.test/private:1" })
      expect(yield* ContainerActions.start(deps, pod(c), state, startAction(c), lookupWith(), plan)).toBe(false)
      expect(state.waiting.get("app")?.message).toMatch(/unauthorized/)
      const secret = dockerSecret({ "reg.test": { username: "alice", password: "s3cret" } })
      const fresh = PodStates.stateOf(new Map(), "u2")
      fresh.sandbox = state.sandbox
      expect(yield* ContainerActions.start(deps, pod(c, ["pull"]), fresh, startAction(c), lookupWith({ pull: secret }), plan)).toBe(true)
    })
  )

  it.scoped("an unreachable registry is a pull failure with backoff, not an agent error", () =>
    Effect.gen(function* () {
      const { deps, state } = yield* world()
      const c = container({ image: "reg.test/down:1" })
      expect(yield* ContainerActions.start(deps, pod(c), state, startAction(c), lookupWith(), plan)).toBe(false)
      expect(state.waiting.get("app")).toEqual({ reason: "ErrImagePull", message: "pulling reg.test/down:1: connection refused" })
    })
  )

  it.scoped("a runtime that runs commands says the image is not used, once, and starts the command", () =>
    Effect.gen(function* () {
      const { deps, events, state, pulls } = yield* world(false)
      const c = container({ command: ["run"] })
      expect(yield* ContainerActions.start(deps, pod(c), state, startAction(c), lookupWith(), plan)).toBe(true)
      expect(events[0]).toMatch(/^Normal ImageNotUsed: Image "reg.test\/busybox:1" is not pulled: the memory runtime runs the container's command on the host/)
      yield* ContainerActions.start(deps, pod(c), state, startAction(c, 1), lookupWith(), plan)
      expect(events.filter((e) => e.includes("ImageNotUsed"))).toHaveLength(1)
      expect(yield* pulls).toBe(0)
    })
  )
})
