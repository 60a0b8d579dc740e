/**
 * A container's identity and confinement for the runtime, from its pod's and its own
 * `securityContext` (the container's fields win), as the kubelet resolves them: the user and
 * groups, capabilities, privilege escalation, a read-only root. A `runAsNonRoot` container that
 * would run as uid 0 does not start (CreateContainerConfigError, the kubelet's message). Without
 * `runAsUser` the runtime runs it as a uid it allocates for the pod (never root).
 */
import { Either } from "effect"
import type * as Pod from "../model/Pod.js"
import type * as Runtime from "../runtime/Runtime.js"

/** What goes into the container request. */
export interface Resolved {
  readonly user?: Runtime.User
  readonly security: Runtime.Security
}

/** Resolve a container's security, or the reason it cannot be started. */
export const resolve = (pod: Pod.Pod, container: Pod.Container): Either.Either<Resolved, string> => {
  const p = pod.spec.securityContext
  const c = container.securityContext
  const uid = c?.runAsUser ?? p?.runAsUser
  const gid = c?.runAsGroup ?? p?.runAsGroup
  const runAsNonRoot = c?.runAsNonRoot ?? p?.runAsNonRoot
  if (runAsNonRoot === true && uid === 0)
    return Either.left(
      `container has runAsNonRoot and image will run as root (pod: "${pod.metadata.name ?? ""}_${pod.metadata.namespace ?? ""}(${pod.metadata.uid ?? ""})", container: ${container.name})`
    )
  // fsGroup is a supplementary group of every container, as the kubelet adds it.
  const groups = [...new Set([...(p?.supplementalGroups ?? []), ...(p?.fsGroup === undefined ? [] : [p.fsGroup])])]
  const caps = c?.capabilities
  const security: Runtime.Security = {
    ...(runAsNonRoot === undefined ? {} : { runAsNonRoot }),
    ...(c?.privileged === undefined ? {} : { privileged: c.privileged }),
    ...(caps === undefined ? {} : { capabilities: { ...(caps.add === undefined ? {} : { add: caps.add }), ...(caps.drop === undefined ? {} : { drop: caps.drop }) } }),
    ...(c?.allowPrivilegeEscalation === undefined ? {} : { allowPrivilegeEscalation: c.allowPrivilegeEscalation }),
    ...(c?.readOnlyRootFilesystem === undefined ? {} : { readOnlyRootFilesystem: c.readOnlyRootFilesystem }),
    ...(uid === undefined && gid !== undefined ? { runAsGroup: gid } : {}),
    ...(uid === undefined && groups.length > 0 ? { supplementalGroups: groups } : {})
  }
  if (uid === undefined) return Either.right({ security })
  return Either.right({
    user: { uid, ...(gid === undefined ? {} : { gid }), ...(groups.length > 0 ? { supplementalGroups: groups } : {}) },
    security
  })
}
