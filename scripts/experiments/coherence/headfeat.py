import sys, json, random, numpy as np, pandas as pd, torch
torch.set_num_threads(1)
sys.path.insert(0,'src')
from vistkit.metrics.coherence import split_sentences
from vistkit.models.coherence_head import CoherenceModel
D='../shared/data/dhm-visual-storytelling/data'
m=CoherenceModel()
def load(ds,sysn):
    st=json.load(open(f'{D}/stories/{ds}/{sysn}.json'))
    df=pd.read_csv(f'{D}/scores/{ds}/{sysn}_C.csv',dtype={'story_id':str})
    return st,dict(zip(df.story_id,df.C_score))
for ds in ['vwp','vist']:
  for s in ['gt_test','llava_vc_p3']:
    st,c=load(ds,s)
    ids=sorted(c)
    if ds=='vist':
        _,cl=load('vist','llava_vc_p3'); _,ch=load('vist','gt_test')
        ids=sorted(i for i in ch if i in cl); ids=sorted(random.Random(0).sample(ids,300))
    out={}
    for i in ids:
        ss=split_sentences(st[i])
        if len(ss)<2: out[i]=None; continue
        ctx=[ss[:k] for k in range(1,len(ss))]; cand=ss[1:]
        out[i]=m.context_logits(ctx,cand).tolist()
    json.dump(out,open(f'headfeat_{ds}_{s}.json','w')); print(ds,s,len(out),flush=True)
