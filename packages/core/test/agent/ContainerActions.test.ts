import { Effect } from "effect"
import { describe, expect, it } from "@effect/vitest"
import * as ContainerActions from "../../src/agent/ContainerActions.js"
import type * as HandlerRunner from "../../src/agent/HandlerRunner.js"
import type * as PolicyEnforcement from "../../src/agent/PolicyEnforcement.js"
import * as PodStates from "../../src/agent/PodStates.js"
import type * as PodSync from "../../src/agent/PodSync.js"
import type * as Prober from "../../src/agent/Prober.js"
import * as RuntimeCapabilities from "../../src/agent/RuntimeCapabilities.js"
import type * as VolumePlan from "../../src/agent/VolumePlan.js"
import type * as Pod from "../../src/model/Pod.js"
import * as MemoryRuntime from "../../src/runtime/MemoryRuntime.js"

const container = (o: Partial<Pod.Container> = {}): Pod.Container => ({ name: "app", image: "x", command: ["run"], ...o })
const pod = (c: Pod.Container = container()): Pod.Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "web", namespace: "default", uid: "u1" },
  spec: { containers: [c] }
})
const lookup: VolumePlan.Lookup = { configMap: () => undefined, secret: () => undefined, claim: () => undefined, volume: () => undefined, token: () => undefined }
const plan: VolumePlan.Plan = { sources: [], mounts: new Map() }

const world = (verdict: PolicyEnforcement.StartVerdict = { run: true }, hook: Prober.Outcome = { result: "success", message: "" }) =>
  Effect.gen(function* () {
    const { runtime, control } = yield* MemoryRuntime.make()
    const events: Array<string> = []
    const hooks: Array<string> = []
    const deps: ContainerActions.Deps = {
      runtime,
      policy: { beforeStart: () => Effect.succeed(verdict), metrics: () => ({ applied: 0, failures: 0 }) },
      capabilities: RuntimeCapabilities.make(runtime),
      emit: (_pod, type, reason, message) => Effect.sync(() => void events.push(`${type} ${reason}: ${message}`)),
      run: (_pod, _state, name, _id, handler: HandlerRunner.Handler, timeoutMs) => Effect.sync(() => (hooks.push(`${name} ${Object.keys(handler).join()} ${timeoutMs}`), hook)),
      specContext: (state, capabilities) => ({ hostIP: "10.0.0.1", podIP: "10.0.0.1", nodeAllocatable: {}, defaultEnv: {}, network: "host", sandboxId: state.sandbox?.id ?? "", hostPorts: [], capabilities })
    }
    const sandbox = yield* runtime.sandboxes.create({ podUid: "u1", name: "web", namespace: "default", hostname: "web", network: "host", ports: [], labels: {} })
    const state = PodStates.stateOf(new Map(), "u1")
    state.sandbox = sandbox
    return { deps, runtime, control, events, hooks, state }
  })

// The container calls (the sandbox is the world's).
const containerCalls = (control: MemoryRuntime.ControlService) => Effect.map(control.calls, (calls) => calls.filter((x) => x.op.startsWith("container.")).map((x) => x.op))

const startAction = (c: Pod.Container = container()): Extract<PodSync.Action, { _tag: "Start" }> => ({ _tag: "Start", container: c, init: false, attempt: 0 })

describe("ContainerActions", () => {
  it.scoped("start: create, start, a Started Event, the postStart hook", () =>
    Effect.gen(function* () {
      const { deps, runtime, control, events, hooks, state } = yield* world()
      const c = container({ lifecycle: { postStart: { exec: { command: ["warm"] } } } })
      expect(yield* ContainerActions.start(deps, pod(c), state, startAction(c), lookup, plan)).toBe(true)
      expect((yield* containerCalls(control))).toEqual(["container.create", "container.start"])
      expect(events).toEqual([
        `Normal ImageNotUsed: Image "x" is not pulled: the memory runtime runs the container's command on the host`,
        "Normal Started: Started container app"
      ])
      expect(hooks).toEqual([`app exec ${ContainerActions.postStartTimeoutMs}`])
      expect((yield* runtime.containers.list())[0]?.status.state).toBe("running")
    })
  )

  it.scoped("start: a spec that cannot be made waits with CreateContainerConfigError and an Event; nothing created", () =>
    Effect.gen(function* () {
      const { deps, control, events, state } = yield* world()
      const { command: _none, ...c } = container()
      expect(yield* ContainerActions.start(deps, pod(c), state, startAction(c), lookup, plan)).toBe(false)
      expect(state.waiting.get("app")?.reason).toBe("CreateContainerConfigError")
      expect(events[1]).toMatch(/^Warning Failed: Error: container "app" has no command/)
      expect(yield* containerCalls(control)).toEqual([])
    })
  )

  it.scoped("start: a NetworkPolicy that refuses keeps the container created and waiting", () =>
    Effect.gen(function* () {
      const { deps, control, state } = yield* world({ run: false, reason: "NetworkPolicyNotEnforced", message: "no" })
      expect(yield* ContainerActions.start(deps, pod(), state, startAction(), lookup, plan)).toBe(true)
      expect((yield* containerCalls(control))).toEqual(["container.create"])
      expect(state.waiting.get("app")).toEqual({ reason: "NetworkPolicyNotEnforced", message: "no" })
    })
  )

  it.scoped("a failed postStart hook: an Event and the container stopped", () =>
    Effect.gen(function* () {
      const { deps, control, events, state } = yield* world({ run: true }, { result: "failure", message: "exit 1" })
      const c = container({ lifecycle: { postStart: { exec: { command: ["warm"] } } } })
      yield* ContainerActions.start(deps, pod(c), state, startAction(c), lookup, plan)
      expect(events).toContain("Warning FailedPostStartHook: PostStartHook failed: exit 1")
      expect((yield* containerCalls(control))).toContain("container.stop")
    })
  )

  it.scoped("kill: a Killing Event, the preStop hook within the grace period, then stop", () =>
    Effect.gen(function* () {
      const { deps, runtime, control, events, hooks, state } = yield* world()
      const c = container({ lifecycle: { preStop: { exec: { command: ["drain"] } } } })
      yield* ContainerActions.start(deps, pod(c), state, startAction(c), lookup, plan)
      const [running] = yield* runtime.containers.list()
      yield* ContainerActions.kill(deps, pod(c), state, { _tag: "Kill", containerId: running!.id, name: "app", gracePeriodSeconds: 30, preStop: true, reason: "Killing", message: "Stopping container app" })
      expect(events).toContain("Normal Killing: Stopping container app")
      expect(hooks).toContain("app exec 30000")
      expect((yield* containerCalls(control)).at(-1)).toBe("container.stop")
      // A container already gone is no failure.
      yield* ContainerActions.kill(deps, undefined, state, { _tag: "Kill", containerId: "gone", name: "app", gracePeriodSeconds: 1, preStop: false, reason: "Killing", message: "m" })
    })
  )
})
