"""The sim presets' losses with the bf16 encoder against the float32 one, same parameters and batch."""
import dataclasses, numpy as np, jax, jax.numpy as jnp, sys
from mqe_model.agents import mqe, gcbc, gciql
rng=np.random.default_rng(0)
B=256
def batch(adim=7):
    im=lambda: rng.integers(0,256,(B,64,64,3),dtype=np.uint8)
    return {"observations":im(),"next_observations":im(),"goals":im(),"waypoints":im(),"actor_goals":im(),"value_goals":im(),
            "actions":rng.uniform(-1,1,(B,adim)).astype(np.float32),"waypoint_offsets":rng.integers(1,10,B).astype(np.int32),
            "rewards":np.zeros(B,np.float32),"masks":np.ones(B,np.float32),"value_rewards":np.zeros(B,np.float32),"value_masks":np.ones(B,np.float32)}
b=batch()
for mod,over in [(mqe,dict(matmul_precision="bfloat16")),(mqe,{}),(gcbc,{}),(gciql,{})]:
    c32=dataclasses.replace(mod.get_config("sim"),encoder="impala_small",batch_size=B)
    c16=dataclasses.replace(c32,encoder="impala_small_bf16",**over)
    a=mod.Agent.create(0,b,c32); a16=a.replace(config=c16)
    try:
        l32,i32=a.total_loss(a.params,b); l16,i16=a16.total_loss(a.params,b)
    except Exception as e:
        print(mod.__name__, "no total_loss", e); continue
    print(mod.__name__, over, float(l32), float(l16), abs(float(l16-l32))/abs(float(l32)))
    for k in i32:
        r=abs(float(i16[k]-i32[k]))/max(abs(float(i32[k])),1e-8)
        if r>1e-3: print("  ",k,float(i32[k]),float(i16[k]),r)
