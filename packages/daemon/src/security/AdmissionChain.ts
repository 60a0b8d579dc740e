/**
 * The server's admission chain: built from the security Context (see Context.ts). Placeholder until [4/10]'s
 * AdmissionChain work lands: contributes nothing, so the server keeps its current behaviour.
 */
import { Effect, type Scope } from "effect"
import type { Context, Contribution } from "./Context.js"

/** Build this component. */
export const make = (_context: Context): Effect.Effect<Contribution, never, Scope.Scope> => Effect.succeed({})
