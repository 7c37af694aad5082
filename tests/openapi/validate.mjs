// Validates an OpenAPI 3.1 document with @apidevtools/swagger-parser: the OpenAPI 3.1
// schema, then its own checks (every $ref resolves, operation ids unique, path
// parameters declared). Exits 1 naming what is wrong.
//   node validate.mjs server/openapi.json
// Two broken copies must be refused too, so a validator that accepts anything fails here.
import SwaggerParser from "@apidevtools/swagger-parser";
import { readFileSync } from "node:fs";

const file = process.argv[2];
const doc = JSON.parse(readFileSync(file, "utf8"));
let failed = 0;
const check = (ok, what) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failed++;
};

async function refused(broken) {
  try {
    await SwaggerParser.validate(broken);
    return false;
  } catch {
    return true;
  }
}

try {
  // validate() dereferences its argument in place: give it a copy
  const api = await SwaggerParser.validate(structuredClone(doc));
  check(api.openapi.startsWith("3.1."), `${file}: OpenAPI ${api.openapi} (3.1 wanted)`);
  check(true, `${file}: valid, ${Object.keys(api.paths).length} paths`);
} catch (e) {
  check(false, `${file}: ${e.message}`);
}
const badRef = structuredClone(doc);
badRef.components.schemas.Error = { $ref: "#/components/schemas/NoSuchSchema" };
check(await refused(badRef), "a copy with a $ref to no schema is refused");
const noInfo = structuredClone(doc);
delete noInfo.info;
check(await refused(noInfo), "a copy without info is refused");
process.exit(failed ? 1 : 0);
