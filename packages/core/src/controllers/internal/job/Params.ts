/**
 * The parts of a Job's spec one sync reads, with upstream's defaults: parallelism 1, backoffLimit
 * 6, completions 1 for Indexed Jobs and none otherwise (work-queue semantics).
 */
import { type JsonObject, asFiniteNumber, asObject } from "../../../object/Json.js"

/** `spec` of a Job ({} when absent). */
export const specOf = (job: JsonObject): JsonObject => asObject(job["spec"])

/** `status` of a Job ({} when absent). */
export const statusOf = (job: JsonObject): JsonObject => asObject(job["status"])

/** A Job's spec as a sync reads it. */
export interface Params {
  /** `completionMode: Indexed`. */
  readonly indexed: boolean
  readonly parallelism: number
  /** Undefined: complete once a pod succeeded and none is active. */
  readonly completions: number | undefined
  readonly backoffLimit: number
  readonly suspended: boolean
  readonly activeDeadlineSeconds: number | undefined
  readonly ttlSecondsAfterFinished: number | undefined
}

/** The Job's `Params`. */
export const of = (job: JsonObject): Params => {
  const spec = specOf(job)
  const indexed = spec["completionMode"] === "Indexed"
  return {
    indexed,
    parallelism: asFiniteNumber(spec["parallelism"]) ?? 1,
    completions: asFiniteNumber(spec["completions"]) ?? (indexed ? 1 : undefined),
    backoffLimit: asFiniteNumber(spec["backoffLimit"]) ?? 6,
    suspended: spec["suspend"] === true,
    activeDeadlineSeconds: asFiniteNumber(spec["activeDeadlineSeconds"]),
    ttlSecondsAfterFinished: asFiniteNumber(spec["ttlSecondsAfterFinished"])
  }
}
