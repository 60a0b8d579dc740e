/**
 * Indexed completion: a pod's completion index (the `batch.kubernetes.io/job-completion-index`
 * annotation), `status.completedIndexes` as Kubernetes writes it (`0-3,5`), and the indexes still
 * to run.
 */
import * as Batch from "../../../model/Batch.js"
import type { JsonObject } from "../../../object/Json.js"
import { annotationsOf } from "../../../object/Metadata.js"
import type { Params } from "./Params.js"

/** The annotation (and label) carrying a pod's completion index. */
export const completionIndexAnnotation = Batch.JobCompletionIndexAnnotation

/** The completion index of an Indexed Job's pod, or undefined when missing or malformed. */
export const completionIndex = (pod: JsonObject): number | undefined => {
  const v: unknown = annotationsOf(pod)[completionIndexAnnotation]
  if (typeof v !== "string" || !/^\d+$/.test(v)) return undefined
  const n = Number(v)
  return Number.isSafeInteger(n) ? n : undefined
}

/** Whether the pod counts for the Job: any pod of a NonIndexed Job, one with an index below `completions` of an Indexed one. */
export const validIndex = (params: Params, pod: JsonObject): boolean => {
  if (!params.indexed) return true
  const ix = completionIndex(pod)
  return ix !== undefined && ix < (params.completions ?? 0)
}

/** The indexes in a `completedIndexes` string (`0-3,5`) below `completions`, ascending, without repeats. */
export const parseIndexes = (text: string | undefined, completions: number): ReadonlyArray<number> => {
  const out = new Set<number>()
  for (const part of (text ?? "").split(",")) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim())
    if (m === null) continue
    const first = Number(m[1])
    const last = Math.min(m[2] === undefined ? first : Number(m[2]), completions - 1)
    for (let i = first; i <= last; i++) out.add(i)
  }
  return [...out].sort((a, b) => a - b)
}

/** Ascending indexes as Kubernetes writes `completedIndexes`: runs as `first-last`, singles alone. */
export const formatIndexes = (indexes: ReadonlyArray<number>): string => {
  const sorted = [...new Set(indexes)].sort((a, b) => a - b)
  const parts: Array<string> = []
  for (let i = 0; i < sorted.length; ) {
    let j = i
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++
    parts.push(i === j ? String(sorted[i]) : `${sorted[i]}-${sorted[j]}`)
    i = j + 1
  }
  return parts.join(",")
}

/** The lowest `count` indexes neither completed nor held by an active pod. */
export const pendingIndexes = (count: number, completions: number, succeeded: ReadonlySet<number>, active: ReadonlyArray<JsonObject>): ReadonlyArray<number> => {
  const taken = new Set<number>(succeeded)
  for (const p of active) {
    const ix = completionIndex(p)
    if (ix !== undefined) taken.add(ix)
  }
  const out: Array<number> = []
  for (let i = 0; i < completions && out.length < count; i++) if (!taken.has(i)) out.push(i)
  return out
}
