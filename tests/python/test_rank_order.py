"""--use-tp-pp-dp-mapping (Megatron-LM's dp_last functional tests): ranks ordered TP, CP, PP, DP.
The groups are megatron-core's (test_megatron_core.py, parallel_state_test.cpp); here the runs it
orders give the default order's losses, and a checkpoint saved under one order resumes under the
other."""
from test_fp8_training import same, train

MAPPING = ["--use-tp-pp-dp-mapping"]


def test_the_tp_pp_dp_order_gives_the_default_orders_losses(tmp_path):
    for name, flags in [("pp2_dp2", ["--pipeline-model-parallel-size", "2"]),
                        ("tp2_pp2", ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"]),
                        # as there, the experts' grid must keep the pipeline groups: ETP x EP = TP x CP
                        ("cp2_pp2", ["--context-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                                     "--expert-tensor-parallel-size", "2"])]:
        want, _ = train(tmp_path, name, flags, ranks=4)
        same(train(tmp_path, name + "_dp_last", flags + MAPPING, ranks=4)[0], want, rel=1e-6, name=name)


def test_a_checkpoint_saved_under_one_order_resumes_under_the_other(tmp_path):
    layout = ["--pipeline-model-parallel-size", "2"]
    whole, _ = train(tmp_path, "whole", layout, ranks=4, iters=6)
    ck = tmp_path / "ck"
    train(tmp_path, "first", layout + MAPPING + ["--save", ck, "--save-interval", "3", "--exit-interval", "3"], ranks=4,
          iters=6)
    same(train(tmp_path, "resumed", layout + ["--load", ck], ranks=4, iters=6)[0], whole[3:], rel=1e-6)


def test_check_args_refuses_an_expert_grid_that_would_change_the_pipeline_groups():
    from data_helpers import check_args
    from test_fp8_training import MODEL
    proc = check_args([*MODEL, "--train-iters", "1", "--context-parallel-size", "2", "--pipeline-model-parallel-size",
                       "2", *MAPPING], 4)
    assert proc.returncode != 0, proc.stdout
    refused = [line for line in proc.stdout.splitlines() if line.startswith("refused: ")]
    assert len(refused) == 1 and "expert_tensor_parallel_size (1) x expert_model_parallel_size (1) must equal " \
        "tensor_model_parallel_size (1) x context_parallel_size (2)" in refused[0], proc.stdout
