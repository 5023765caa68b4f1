// web/views/wire.js under Node.js: reads a packed value (playground/wire.py's encode) as JSON on
// stdin and prints what the view would be given.
import { decode } from "../../web/views/wire.js";

let input = "";
for await (const chunk of process.stdin) input += chunk;
console.log(JSON.stringify(decode(JSON.parse(input))));
