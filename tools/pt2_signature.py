"""The signature infergate reads from an AOTInductor package (.pt2).

LibTorch 2.6's packages do not record their inputs' and outputs' shapes, so
an exporter writes them into the package's metadata under the key
"infergate.config", as config.pbtxt text holding max_batch_size, inputs and
outputs. With it a model folder needs no config.pbtxt, and the server
refuses a config.pbtxt that disagrees with the package (a max_batch_size
above the exported maximum, other dims, dtypes or names).

    program = torch.export.export(module, (torch.randn(2, 16),),
                                  dynamic_shapes={"x": {0: torch.export.Dim("batch", max=64)}})
    torch._inductor.aoti_compile_and_package(
        program, package_path="repo/my_model/1/model.pt2",
        inductor_configs={"aot_inductor.metadata": pt2_signature.metadata(program, outputs=["y"])})

The batch dimension is dim 0 when it is one dynamic dimension shared by
every input; its maximum (from the export's range constraints) is
max_batch_size, and it must be finite. With no such dimension
max_batch_size is 0 and dims are the whole shapes. Other dynamic
dimensions are -1.
"""
import torch

KEY = "infergate.config"

DTYPES = {
    torch.float32: "FLOAT32", torch.float16: "FLOAT16", torch.bfloat16: "BFLOAT16", torch.float64: "FLOAT64",
    torch.int64: "INT64", torch.int32: "INT32", torch.int16: "INT16", torch.int8: "INT8", torch.uint8: "UINT8",
    torch.bool: "BOOL",
}


def _symbol(size):
    """The sympy symbol of a dynamic size, or None for a fixed one."""
    if isinstance(size, int):
        return None
    expr = size.node.expr
    return expr if getattr(expr, "is_Symbol", False) else None


def _values(program, names):
    nodes = {n.name: n for n in program.graph.nodes}
    return [nodes[name].meta["val"] for name in names]


def _output_values(program):
    output = next(n for n in program.graph.nodes if n.op == "output")
    flat = output.args[0]
    user = len(program.graph_signature.user_outputs)
    return [node.meta["val"] for node in flat[len(flat) - user:]]


def _tensor(kind, name, value, batched):
    if value.dtype not in DTYPES:
        raise ValueError("%s '%s': dtype %s is not served" % (kind, name, value.dtype))
    shape = list(value.shape)[1:] if batched else list(value.shape)
    dims = [-1 if _symbol(s) is not None else int(s) for s in shape]
    return '%s { name: "%s" dtype: %s dims: [%s] }' % (kind, name, DTYPES[value.dtype], ", ".join(map(str, dims)))


def config_text(program, inputs=None, outputs=None):
    """config.pbtxt text for `program` (a torch.export.ExportedProgram).
    `inputs`/`outputs` name the tensors; by default the inputs keep their
    argument names and the outputs are output0, output1, ..."""
    input_values = _values(program, program.graph_signature.user_inputs)
    output_values = _output_values(program)
    inputs = inputs or list(program.graph_signature.user_inputs)
    outputs = outputs or ["output%d" % i for i in range(len(output_values))]
    if len(inputs) != len(input_values) or len(outputs) != len(output_values):
        raise ValueError("the program takes %d inputs and gives %d outputs; %d and %d names given"
                         % (len(input_values), len(output_values), len(inputs), len(outputs)))
    firsts = {_symbol(v.shape[0]) if v.dim() > 0 else None for v in input_values}
    batch = firsts.pop() if len(firsts) == 1 else None
    max_batch = 0
    if batch is not None:
        upper = program.range_constraints[batch].upper
        if not upper.is_finite:
            raise ValueError("the batch dimension has no maximum: export it with Dim(..., max=N)")
        max_batch = int(upper)
    lines = ["max_batch_size: %d" % max_batch]
    lines += [_tensor("inputs", n, v, batch is not None) for n, v in zip(inputs, input_values)]
    # An output is batched when its first dim is the batch dimension.
    for n, v in zip(outputs, output_values):
        batched = batch is not None and v.dim() > 0 and _symbol(v.shape[0]) == batch
        if batch is not None and not batched:
            raise ValueError("output '%s' does not keep the batch dimension first" % n)
        lines.append(_tensor("outputs", n, v, batched))
    return "\n".join(lines) + "\n"


def metadata(program, inputs=None, outputs=None):
    """What to pass as inductor_configs["aot_inductor.metadata"]."""
    return {KEY: config_text(program, inputs, outputs)}
