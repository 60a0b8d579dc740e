/** The sandboxes of the memory runtime: one per pod uid; removing one kills and drops its containers. */
import { Clock, Effect } from "effect"
import * as Runtime from "../Runtime.js"
import { type Node, iso, record } from "./memoryNode.js"
import { kill } from "./memoryProcess.js"

/** Create the pod's sandbox, or fail `AlreadyExists` with the one it has. */
const create = (node: Node, spec: Runtime.SandboxSpec): Effect.Effect<Runtime.Sandbox, Runtime.AlreadyExists> =>
  Effect.gen(function* () {
    for (const s of node.sandboxes.values())
      if (s.spec.podUid === spec.podUid)
        return yield* new Runtime.AlreadyExists({
          kind: "sandbox",
          id: s.id,
          message: `pod ${spec.podUid} already has sandbox ${s.id}`
        })
    const now = yield* Clock.currentTimeMillis
    const sandbox: Runtime.Sandbox = { id: `sb-${node.nextId++}`, spec, state: "ready", createdAt: iso(now) }
    node.sandboxes.set(sandbox.id, sandbox)
    record(node, "sandbox.create", sandbox.id, spec.podUid)
    return sandbox
  })

/** The sandbox, or `RuntimeNotFound`. */
const get = (node: Node, id: string): Effect.Effect<Runtime.Sandbox, Runtime.NotFound> =>
  Effect.suspend(() => {
    const s = node.sandboxes.get(id)
    return s
      ? Effect.succeed(s)
      : Effect.fail(new Runtime.NotFound({ kind: "sandbox", id, message: `sandbox ${id} not found` }))
  })

/** Remove a sandbox with its containers (killed first) and its policy; a missing one is fine. */
const remove = (node: Node, id: string): Effect.Effect<void> =>
  Effect.gen(function* () {
    if (!node.sandboxes.has(id)) return
    record(node, "sandbox.remove", id)
    for (const e of [...node.entries.values()])
      if (e.container.spec.sandboxId === id) {
        yield* kill(e)
        node.entries.delete(e.container.id)
      }
    node.sandboxes.delete(id)
    node.policies.delete(id)
  })

/** The `Runtime.Sandboxes` of a node. */
export const sandboxes = (node: Node): Runtime.Sandboxes => ({
  create: (spec) => create(node, spec),
  get: (id) => get(node, id),
  list: (filter) => Effect.sync(() => [...node.sandboxes.values()].filter((s) => Runtime.matchesSandbox(s, filter))),
  remove: (id) => remove(node, id)
})
