"""Summary column lists, exactly as docs/formats.md §4 (code order).  Golden-tested."""

from __future__ import annotations

OP_SUMMARY = ["Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "OP State",
              "Task Type", "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)"]
#: Appended to op_summary when tensor info exists.
OP_SUMMARY_TENSOR = ["Block Num", "Mix Block Num", "HF32 Eligible", "Input Shapes",
                     "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
                     "Output Formats", "Context ID"]
#: Appended after the tensor columns: the cost model's FLOPs and bytes (unfused) and the modelled
#: memory-bound ratio (bytes/BW)/(compute time) against the job's peaks (docs/analyze.md).
OP_SUMMARY_COST = ["FLOPs", "Bytes", "Memory Bound Ratio"]
OP_STATISTIC = ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)",
                "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
API_STATISTIC = ["Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)",
                 "Max(us)", "Variance"]
ACL_STATISTIC = ["Process ID", "Thread ID", "Type", "Name", "Total Time Ratio(%)",
                 "Total Time(us)", "Count", "Avg(us)", "Max(us)", "Min(us)"]
OP_STATISTIC_S2 = ["Task ID", "Stream ID", "OP Name", "Task Type", "Total Time Ratio(%)",
                   "Total Time(us)", "Count", "Avg(us)", "Max(us)", "Min(us)"]
TASK_TIME = ["Device_id", "kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)",
             "task_start(us)", "task_stop(us)"]
STEP_TRACE = ["Device_id", "Iteration ID", "FP Start(us)", "BP End(us)", "Iteration End(us)",
              "Iteration Time(us)", "FP to BP Time(us)", "Iteration Refresh(us)",
              "Data Aug Bound(us)", "Model ID"]
MSPROF_TX = ["Device_id", "pid", "tid", "category", "event_type", "payload_type",
             "payload_value", "Start_time(us)", "End_time(us)", "message_type", "message",
             "domain", "Device Start_time(us)", "Device End_time(us)"]
HOST_CPU_USAGE = ["Device_id", "Total Cpu Numbers", "Occupied Cpu Numbers",
                  "Recommend Cpu Numbers"]
HOST_MEM_USAGE = ["Device_id", "Total Memory(KB)", "Peak Used Memory(KB)",
                  "Recommend Memory(KB)"]
#: host_sys_usage per process (seed 003: "CPU/Memory usage of processes on the host"; ours).
HOST_PROCESS_CPU_USAGE = ["Device_id", "PID", "Average Usage(%)", "Max Usage(%)", "Samples"]
HOST_PROCESS_MEM_USAGE = ["Device_id", "PID", "Average RSS(KB)", "Peak RSS(KB)", "Samples"]
#: fusion_op (TensorFlow jobs: the ops grappler fused, :mod:`openmsprof.export.msprof.fusion_op`).
FUSION_OP = ["Device_id", "Model Name", "Model ID", "Fusion Op", "Original Ops", "Memory Input(KB)",
             "Memory Output(KB)", "Memory Weight(KB)", "Memory Workspace(KB)", "Memory Total(KB)"]

#: File name → header (op_summary without its optional tensor columns).
ALL = {
    "op_summary": OP_SUMMARY, "op_statistic": OP_STATISTIC, "api_statistic": API_STATISTIC,
    "acl_statistic": ACL_STATISTIC, "op_statistic_s2": OP_STATISTIC_S2, "task_time": TASK_TIME,
    "step_trace": STEP_TRACE, "msprof_tx": MSPROF_TX, "host_cpu_usage": HOST_CPU_USAGE,
    "host_mem_usage": HOST_MEM_USAGE,
}
#: Every summary this package writes: ALL (docs/formats.md §4), the TensorFlow-only fusion_op, which
#: docs/formats.md §4 does not list (its columns are msprof's, docs/tensorflow.md), and the per-process
#: host usage (docs/formats.md).
WRITTEN = {**ALL, "fusion_op": FUSION_OP, "host_process_cpu_usage": HOST_PROCESS_CPU_USAGE,
           "host_process_mem_usage": HOST_PROCESS_MEM_USAGE}
