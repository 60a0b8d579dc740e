/**
 * `top`'s numbers, pure: resource quantities (`250m`, `1.5`, `128Mi`, `12345678n`) read through
 * core's `Quantity`, CPU printed in millicores and memory in Mi, as kubectl top prints them,
 * with node percentages of allocatable.
 */
import { Quantity } from "@koder/fleet-core"
import { Either } from "effect"
import { arr, meta, obj, str } from "./Cli.js"

type Json = Record<string, unknown>

/** A quantity's value in units (cores, bytes); 0 when unreadable. */
export const units = (v: unknown): number => {
  const q = Quantity.parse(str(v) || "0")
  return Either.isRight(q) ? Number(q.right.nanos) / 1e9 : 0
}

/** CPU cores as `123m`. */
export const cpu = (cores: number): string => `${Math.round(cores * 1000)}m`

/** Bytes as `45Mi`. */
export const memory = (bytes: number): string => `${Math.round(bytes / (1024 * 1024))}Mi`

const pct = (used: number, of: number): string => (of > 0 ? `${Math.round((used / of) * 100)}%` : "<unknown>")

/** A `top nodes` row: name, cpu, cpu%, memory, memory%. */
export const nodeRow = (m: Json, allocatable: Json): Array<string> => {
  const u = obj(m["usage"])
  const c = units(u["cpu"])
  const b = units(u["memory"])
  return [str(meta(m)["name"]), cpu(c), pct(c, units(allocatable["cpu"])), memory(b), pct(b, units(allocatable["memory"]))]
}

/** A `top pods` row: name, cpu, memory (containers summed). */
export const podRow = (m: Json): Array<string> => {
  const cs = arr(m["containers"]).map((c) => obj(obj(c)["usage"]))
  return [str(meta(m)["name"]), cpu(cs.reduce((a, u) => a + units(u["cpu"]), 0)), memory(cs.reduce((a, u) => a + units(u["memory"]), 0))]
}

/** A container's cells: name, cpu, memory. */
export const containerCells = (c: Json): Array<string> => [str(c["name"]), cpu(units(obj(c["usage"])["cpu"])), memory(units(obj(c["usage"])["memory"]))]
